package deploy_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"nodehealth.io/nodehealth/test/framework/testenv"
)

const (
	apfDir         = "deploy/apf/"
	apfName        = "nodehealth-extension-leases"
	flowSchemaUID  = "X-Kubernetes-PF-FlowSchema-UID"
	priorityLvlUID = "X-Kubernetes-PF-PriorityLevel-UID"
)

// headerRecorder keeps the APF classification headers of the last response.
type headerRecorder struct {
	mu         sync.Mutex
	flowSchema string
	level      string
}

func (h *headerRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			h.mu.Lock()
			h.flowSchema, h.level = resp.Header.Get(flowSchemaUID), resp.Header.Get(priorityLvlUID)
			h.mu.Unlock()
		}
		return resp, err
	})
}

func (h *headerRecorder) last() (flowSchema, level string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.flowSchema, h.level
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The FlowSchema shipped in deploy/apf classifies an extension's Lease writes —
// a service account writing a Lease in the extension namespace — into the
// nodehealth priority level, as the API server's response headers say, and
// leaves its reads of the namespace and its Lease writes elsewhere to the
// defaults.
func TestExtensionLeaseFlowSchema(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 5*time.Minute)

	objs := render(t, apfDir)
	plc := find[*flowcontrolv1.PriorityLevelConfiguration](t, objs, apfName)
	fs := find[*flowcontrolv1.FlowSchema](t, objs, apfName)
	if fs.Spec.PriorityLevelConfiguration.Name != plc.Name {
		t.Fatalf("FlowSchema uses priority level %q, want %q", fs.Spec.PriorityLevelConfiguration.Name, plc.Name)
	}
	if len(objs) != 2 {
		t.Errorf("%d objects in %s, want the priority level and the FlowSchema", len(objs), apfDir)
	}
	// deploy/ installs them too.
	all := render(t, "deploy/")
	find[*flowcontrolv1.PriorityLevelConfiguration](t, all, apfName)
	find[*flowcontrolv1.FlowSchema](t, all, apfName)

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, _ = kubectl(t, ctx, "delete", "-k", apfDir, "--ignore-not-found")
	})
	mustKubectl(t, ctx, "apply", "--server-side", "-k", apfDir)
	flowcontrol := env.Client.FlowcontrolV1()
	gotFS, err := flowcontrol.FlowSchemas().Get(ctx, apfName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotPL, err := flowcontrol.PriorityLevelConfigurations().Get(ctx, apfName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// An extension: a service account in its own namespace with the
	// heartbeat's Lease permissions in the extension namespace.
	const extNS, extSA, otherNS = "apf-extension", "apf-probe", "apf-elsewhere"
	for _, ns := range []string{extNS, otherNS, leaseNamespace} {
		created, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			t.Fatal(err)
		case ns != leaseNamespace:
			// The extension namespace stays: deploy/ (applied by the next
			// tests) owns it, and a namespace still terminating would fail
			// that apply.
			t.Cleanup(func() {
				_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
			})
		}
	}
	for _, ns := range []string{leaseNamespace, otherNS} {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "apf-probe-leases", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				Verbs: []string{"get", "list", "create", "update", "delete"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apf-probe-leases", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: extNS, Name: extSA}}}
		if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.RbacV1().RoleBindings(ns).Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
			_ = env.Client.RbacV1().Roles(ns).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
	}
	sa, err := env.ClientForServiceAccount(ctx, extNS, extSA)
	if err != nil {
		t.Fatal(err)
	}
	rec := &headerRecorder{}
	cfg := rest.CopyConfig(sa.Config)
	cfg.Wrap(rec.wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	lease := func(name string) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("apf-probe"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
	}
	// The API server's APF configuration follows the objects through an
	// informer: write until the classification shows (or a minute passes).
	leases := client.CoordinationV1().Leases(leaseNamespace)
	name := "apf-probe.apf-node"
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_ = leases.Delete(ctx, name, metav1.DeleteOptions{})
		if _, err := leases.Create(ctx, lease(name), metav1.CreateOptions{}); err != nil {
			return false, err
		}
		f, l := rec.last()
		return f == string(gotFS.UID) && l == string(gotPL.UID), nil
	})
	if err != nil {
		f, l := rec.last()
		t.Fatalf("an extension's Lease create was not classified by %s: FlowSchema UID %q (want %q), priority level UID %q (want %q): %v",
			apfName, f, gotFS.UID, l, gotPL.UID, err)
	}

	// Renewal (update) and read (get): the heartbeat's other calls.
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := rec.last(); f != string(gotFS.UID) {
		t.Errorf("get of the Lease classified by FlowSchema UID %q, want %s", f, apfName)
	}
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if f, pl := rec.last(); f != string(gotFS.UID) || pl != string(gotPL.UID) {
		t.Errorf("renewal classified by FlowSchema UID %q / level %q, want %s", f, pl, apfName)
	}

	// Not matched: a list of the namespace (not a heartbeat verb) and a Lease
	// write in another namespace.
	if _, err := leases.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if f, _ := rec.last(); f == "" || f == string(gotFS.UID) {
		t.Errorf("a list of the Leases classified by FlowSchema UID %q; want another FlowSchema", f)
	}
	if _, err := client.CoordinationV1().Leases(otherNS).Create(ctx, lease(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if f, _ := rec.last(); f == "" || f == string(gotFS.UID) {
		t.Errorf("a Lease write in namespace %s classified by FlowSchema UID %q; want another FlowSchema", otherNS, f)
	}
	if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
