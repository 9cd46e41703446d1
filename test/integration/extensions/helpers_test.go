package extensions_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Names deploy/extensions/ and deploy/controller/ define.
const (
	leaseNamespace  = nodev1alpha1.DefaultLeaseNamespace
	policyName      = "nodehealth-extension-lease-own-node"
	leaseRole       = "nodehealth-extension-lease"
	identityRole    = "nodehealth-extension-identity"
	controllerNS    = "nodehealth-system"
	controllerSA    = "nodehealth-controller"
	canaryLeaseName = nodev1alpha1.ControllerCanaryLease
)

func repoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// command runs a binary against the test cluster from the repository root,
// without the developer's ~/.kube, and returns stdout, stderr and the error.
func command(t testing.TB, ctx context.Context, path string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = repoPath(t)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// kubectl runs the control plane's kubectl as the admin.
func kubectl(t testing.TB, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	env := testenv.Env(t)
	return command(t, ctx, env.Binary(framework.Kubectl), append([]string{"--kubeconfig=" + env.Kubeconfig}, args...)...)
}

func mustKubectl(t testing.TB, ctx context.Context, args ...string) string {
	t.Helper()
	stdout, stderr, err := kubectl(t, ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

var (
	securityOnce sync.Once
	securityErr  error
)

// installSecurity applies deploy/extensions/ (and the namespaces and the
// controller RBAC of deploy/controller/, which the policy is written for) as
// documented, once per package, and waits until the admission policy is
// type-checked and enforced.
func installSecurity(t *testing.T) {
	t.Helper()
	securityOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		securityErr = doInstallSecurity(t, ctx)
	})
	if securityErr != nil {
		t.Fatal(securityErr)
	}
}

func doInstallSecurity(t *testing.T, ctx context.Context) error {
	env := testenv.Env(t)
	for _, args := range [][]string{
		{"apply", "--server-side", "-f", "deploy/controller/namespaces.yaml", "-f", "deploy/controller/rbac.yaml"},
		{"apply", "--server-side", "-k", "deploy/extensions/"},
	} {
		if stdout, stderr, err := kubectl(t, ctx, args...); err != nil {
			return fmt.Errorf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
	}

	// The CEL must type-check without warnings: a typo in a field name
	// would otherwise only show as a runtime error, and with failurePolicy
	// Fail as every write being denied.
	policies := env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := policies.Get(ctx, policyName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the policy to be type-checked: %w", err)
	}
	p, err := policies.Get(ctx, policyName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
		return fmt.Errorf("policy %s has type-checking warnings: %+v", policyName, w)
	}
	for _, c := range p.Status.Conditions {
		if c.Status != metav1.ConditionTrue && c.Type == "Ready" {
			return fmt.Errorf("policy %s not ready: %+v", policyName, c)
		}
	}

	// The API server loads policies and bindings through an informer: poll
	// until a write the policy must deny is denied.
	probeNode := createNode(t, "policy-probe")
	probeNS, err := env.CreateNamespace(ctx, "policy-probe")
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = env.DeleteNamespace(context.Background(), probeNS.Name) })
	sa, err := extensionClient(t, ctx, probeNS.Name, "probe", "probe-pod", probeNode)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := sa.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease("probe.some-other-node", "probe"), metav1.CreateOptions{})
		switch {
		case err == nil:
			// Not enforced yet; remove the Lease the policy will not let
			// the probe delete once it is.
			return false, env.Client.CoordinationV1().Leases(leaseNamespace).Delete(ctx, "probe.some-other-node", metav1.DeleteOptions{})
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), policyName):
			return true, nil
		default:
			// RBAC (the RoleBinding) may not be in the authorizer's cache yet.
			return false, nil
		}
	})
	if err != nil {
		return fmt.Errorf("waiting for the admission policy to be enforced: %w", err)
	}
	return nil
}

// createNode creates a Node nothing simulates (no kwok): the tests need the
// object, its name and UID for tokens and ownerReferences, not a kubelet. It is
// deleted when the test ends.
func createNode(t *testing.T, name string) string {
	t.Helper()
	env := testenv.Env(t)
	_, err := env.Client.CoreV1().Nodes().Create(testenv.Context(t), framework.NewUnmanagedNode(name, nil), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.DeleteNode(ctx, name)
	})
	return name
}

// extensionClient returns a client for ServiceAccount namespace/sa whose token
// is bound to a pod on node, with that ServiceAccount bound to the extension
// roles of deploy/extensions/ the way deploy/examples/ binds them.
func extensionClient(t *testing.T, ctx context.Context, namespace, sa, pod, node string) (kubernetes.Interface, error) {
	if err := bindExtensionRoles(t, ctx, namespace, sa); err != nil {
		return nil, err
	}
	c, err := testenv.Env(t).ClientForPodServiceAccount(ctx, namespace, sa, pod, node)
	if err != nil {
		return nil, err
	}
	return c.Client, waitForLeaseAccess(ctx, c.Client)
}

// waitForLeaseAccess waits until RBAC lets client create Leases in the
// extension namespace. The API server's authorizer learns of a new
// RoleBinding through an informer, so a request made right after the binding
// was created may still be forbidden, and a test expecting the admission
// policy's answer would see RBAC's instead.
func waitForLeaseAccess(ctx context.Context, client kubernetes.Interface) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: leaseNamespace, Verb: "create", Group: coordinationv1.GroupName, Resource: "leases",
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	})
}

func bindExtensionRoles(t *testing.T, ctx context.Context, namespace, sa string) error {
	env := testenv.Env(t)
	name := namespace + "-" + sa
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}}
	_, err := env.Client.RbacV1().RoleBindings(leaseNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leaseRole},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: identityRole},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.RbacV1().RoleBindings(leaseNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return nil
}

// newLease returns an extension Lease held by holder and renewed now.
func newLease(name, holder string) *coordinationv1.Lease {
	ext, node, _ := strings.Cut(name, ".")
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: leaseNamespace, Labels: nodev1alpha1.LeaseLabels(ext, node)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
}

// wantDenied fails unless err is the admission policy's denial and its
// message contains every part.
func wantDenied(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want denied by %s", what, policyName)
		return
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), policyName) {
		t.Errorf("%s: got %v, want a denial by %s", what, err, policyName)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: message %q lacks %q", what, err.Error(), p)
		}
	}
}

func wantAllowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// deleteLease removes a Lease as the admin; a missing Lease is fine.
func deleteLease(t *testing.T, name string) {
	t.Helper()
	err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: %v", err)
	}
}

// nodeUID returns a node's UID.
func nodeUID(t *testing.T, name string) string {
	t.Helper()
	n, err := testenv.Env(t).Client.CoreV1().Nodes().Get(testenv.Context(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(n.UID)
}
