package extensions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// An extension's pod-bound token on node n1 can do everything a heartbeat
// does to kube-proxy.n1: create, renew, release, re-acquire and delete it.
func TestOwnNodeLeaseLifecycle(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	createNode(t, "n1")
	ns := testenv.NewNamespace(t, "own-node")
	client, err := extensionClient(t, ctx, ns, "kube-proxy", "kube-proxy-n1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	leases := client.CoordinationV1().Leases(leaseNamespace)
	t.Cleanup(func() { deleteLease(t, "kube-proxy.n1") })

	l, err := leases.Create(ctx, newLease("kube-proxy.n1", "kube-proxy-n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create own Lease: %v", err)
	}
	// Renew: an update of renewTime.
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	wantAllowed(t, "renew (update) own Lease", err)
	// Release: empty holder plus reason, as a merge patch.
	release, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{
			nodev1alpha1.ReasonAnnotation: "ProbeFailed", nodev1alpha1.MessageAnnotation: "GET http://127.0.0.1:10256/healthz: 503"}},
		"spec": map[string]any{"holderIdentity": ""},
	})
	l, err = leases.Patch(ctx, "kube-proxy.n1", types.MergePatchType, release, metav1.PatchOptions{})
	wantAllowed(t, "release (patch) own Lease", err)
	if err == nil && ptr.Deref(l.Spec.HolderIdentity, "x") != "" {
		t.Errorf("holderIdentity after release = %q", ptr.Deref(l.Spec.HolderIdentity, "<nil>"))
	}
	// Re-acquire.
	_, err = leases.Patch(ctx, "kube-proxy.n1", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"kube-proxy-n1"}}`), metav1.PatchOptions{})
	wantAllowed(t, "re-acquire own Lease", err)
	_, err = leases.Get(ctx, "kube-proxy.n1", metav1.GetOptions{})
	wantAllowed(t, "get own Lease", err)
	wantAllowed(t, "delete own Lease", leases.Delete(ctx, "kube-proxy.n1", metav1.DeleteOptions{}))
}

// Every write outside the token's node is denied, whatever the verb.
func TestOtherNodesLeasesDenied(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	createNode(t, "n2")
	createNode(t, "n3")
	createNode(t, "b.n3")
	ns := testenv.NewNamespace(t, "other-node")
	client, err := extensionClient(t, ctx, ns, "kube-proxy", "kube-proxy-n3", "n3")
	if err != nil {
		t.Fatal(err)
	}
	leases := client.CoordinationV1().Leases(leaseNamespace)
	admin := env.Client.CoordinationV1().Leases(leaseNamespace)

	_, err = leases.Create(ctx, newLease("kube-proxy.n2", "kube-proxy-n3"), metav1.CreateOptions{})
	wantDenied(t, "create another node's Lease", err, "on node n3", "not kube-proxy.n2")

	// Existing Leases of another node: no takeover, no release, no delete.
	for _, name := range []string{"kube-proxy.n2", "kube-proxy.b.n3"} {
		if _, err := admin.Create(ctx, newLease(name, "owner"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteLease(t, name) })
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get (RBAC allows reading): %v", err)
		}
		l.Spec.HolderIdentity = ptr.To("kube-proxy-n3")
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		wantDenied(t, "update "+name, err)
		_, err = leases.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"holderIdentity":""}}`), metav1.PatchOptions{})
		wantDenied(t, "release "+name, err)
		wantDenied(t, "delete "+name, leases.Delete(ctx, name, metav1.DeleteOptions{}))
	}

	// The Lease of node b.n3, whose name ends in ".n3": a suffix match would
	// let this token write it.
	_, err = leases.Create(ctx, newLease("kube-proxy.b.n3", "kube-proxy-n3"), metav1.CreateOptions{})
	wantDenied(t, "create kube-proxy.b.n3 (Lease of node b.n3, a suffix of n3)", err)

	// A name without an extension part, equal to the node's name.
	_, err = leases.Create(ctx, newLease("n3", "kube-proxy-n3"), metav1.CreateOptions{})
	wantDenied(t, "create n3", err)
	_, err = leases.Create(ctx, newLease(canaryLeaseName, "kube-proxy-n3"), metav1.CreateOptions{})
	wantDenied(t, "create the controller's canary Lease", err)
}

// The exact match of the brief: kube-proxy.b.n1 belongs to node b.n1, so a
// pod on n1 may not write it while a pod on b.n1 may.
func TestDottedNodeNamesExactMatch(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	createNode(t, "n1")
	createNode(t, "b.n1")
	ns := testenv.NewNamespace(t, "dotted")
	onN1, err := extensionClient(t, ctx, ns, "kube-proxy", "kube-proxy-n1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	onBN1, err := testenv.Env(t).ClientForPodServiceAccount(ctx, ns, "kube-proxy", "kube-proxy-b-n1", "b.n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForLeaseAccess(ctx, onBN1.Client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLease(t, "kube-proxy.b.n1") })

	_, err = onN1.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease("kube-proxy.b.n1", "kube-proxy-n1"), metav1.CreateOptions{})
	wantDenied(t, "pod on n1 creates kube-proxy.b.n1", err, "on node n1", "not kube-proxy.b.n1")

	_, err = onBN1.Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease("kube-proxy.b.n1", "kube-proxy-b-n1"), metav1.CreateOptions{})
	wantAllowed(t, "pod on b.n1 creates kube-proxy.b.n1", err)

	wantDenied(t, "pod on n1 deletes kube-proxy.b.n1",
		onN1.CoordinationV1().Leases(leaseNamespace).Delete(ctx, "kube-proxy.b.n1", metav1.DeleteOptions{}))
}

// A token that is not bound to a pod carries no node name and is denied.
func TestTokenWithoutNodeNameDenied(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	createNode(t, "n1")
	ns := testenv.NewNamespace(t, "unbound")
	if err := bindExtensionRoles(t, ctx, ns, "kube-proxy"); err != nil {
		t.Fatal(err)
	}
	sa, err := testenv.Env(t).ClientForServiceAccount(ctx, ns, "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForLeaseAccess(ctx, sa.Client); err != nil {
		t.Fatal(err)
	}
	_, err = sa.Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease("kube-proxy.n1", "x"), metav1.CreateOptions{})
	wantDenied(t, "unbound token creates kube-proxy.n1", err, "carries no node name")
}

// The controller's identity renews its canary Lease with its real RBAC
// (deploy/controller/rbac.yaml), even with a token that carries no node name,
// and can write nothing else: not even with RBAC's unrestricted create.
func TestTheControllersIdentityRenewsItsCanaryAndCanWriteNothingElse(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	// The controller's namespace enforces the restricted Pod Security
	// Standard, which the framework's test pod does not meet; an unbound
	// token is the stricter case anyway (no node name at all).
	sa, err := env.ClientForServiceAccount(ctx, controllerNS, controllerSA)
	if err != nil {
		t.Fatal(err)
	}
	leases := sa.Client.CoordinationV1().Leases(leaseNamespace)
	t.Cleanup(func() { deleteLease(t, canaryLeaseName) })

	checkWritesOnlyItsCanary(t, ctx, leases, "nodehealth-controller-abc", "controller")
}

// People (here the admin, group system:masters) are left to RBAC.
func TestTheOwnNodePolicyLeavesPeopleToRBAC(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	admin := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace)
	for _, name := range []string{"kube-proxy.admin-n2", "no-dot", canaryLeaseName + "-other"} {
		t.Cleanup(func() { deleteLease(t, name) })
		l, err := admin.Create(ctx, newLease(name, "admin"), metav1.CreateOptions{})
		wantAllowed(t, "admin creates "+name, err)
		if err != nil {
			continue
		}
		l.Spec.HolderIdentity = ptr.To("")
		_, err = admin.Update(ctx, l, metav1.UpdateOptions{})
		wantAllowed(t, "admin updates "+name, err)
		wantAllowed(t, "admin deletes "+name, admin.Delete(ctx, name, metav1.DeleteOptions{}))
	}
}

// Extensions need no Node permission: the token's own node is readable from a
// SelfSubjectReview (node name and UID, for the Lease's ownerReference), and
// every Node read or write is forbidden.
func TestExtensionNeedsNoNodePermissions(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	createNode(t, "n1")
	ns := testenv.NewNamespace(t, "no-node-access")
	client, err := extensionClient(t, ctx, ns, "kube-proxy", "kube-proxy-n1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	extra := review.Status.UserInfo.Extra
	if got := extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "n1" {
		t.Errorf("node-name extra = %v, want [n1]", got)
	}
	if got, want := extra["authentication.kubernetes.io/node-uid"], nodeUID(t, "n1"); len(got) != 1 || got[0] != want {
		t.Errorf("node-uid extra = %v, want [%s]", got, want)
	}

	nodes := client.CoreV1().Nodes()
	_, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("patch own Node: got %v, want Forbidden", err)
	}
	_, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"status":{"conditions":[]}}`), metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) {
		t.Errorf("patch own Node status: got %v, want Forbidden", err)
	}
	if _, err := nodes.Get(ctx, "n1", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get own Node: got %v, want Forbidden", err)
	}
	if _, err := client.CoordinationV1().Leases(leaseNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list Leases: got %v, want Forbidden", err)
	}
	if _, err := client.CoordinationV1().Leases("default").Create(ctx, newLease("kube-proxy.n1", "x"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a Lease outside %s: got %v, want Forbidden", leaseNamespace, err)
	}
}

// kube-controller-manager's garbage collector deletes the Leases of a deleted
// Node (ownerReference) although its token carries no node name: the policy
// must not block it.
func TestGarbageCollectionUnaffected(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	createNode(t, "gc-n1")
	ns := testenv.NewNamespace(t, "gc")
	client, err := extensionClient(t, ctx, ns, "kube-proxy", "kube-proxy-gc", "gc-n1")
	if err != nil {
		t.Fatal(err)
	}
	l := newLease("kube-proxy.gc-n1", "kube-proxy-gc")
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gc-n1", UID: types.UID(nodeUID(t, "gc-n1"))}}
	t.Cleanup(func() { deleteLease(t, l.Name) })
	if _, err := client.CoordinationV1().Leases(leaseNamespace).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.DeleteNode(ctx, "gc-n1"); err != nil {
		t.Fatal(err)
	}
	lw := framework.NamedListWatch(env.Client.CoordinationV1().RESTClient(), "leases", leaseNamespace, l.Name)
	if err := framework.WaitForDeletion[*coordinationv1.Lease](ctx, lw, leaseNamespace, l.Name); err != nil {
		t.Fatalf("the garbage collector did not delete the Lease of the deleted node: %v", err)
	}
}

// The policy recognises the controller by its RBAC, not by its name: a
// controller whose ServiceAccount was renamed (here: another name in another
// namespace, bound to the controller's Role) renews its canary Lease and is
// still held to writing nothing else. Before, the policy named the identity
// and a renamed controller was refused its canary and went blind.
func TestRenamedControllerIdentity(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	const ns, name = "default", "renamed-nodehealth-controller"
	sa, err := env.ClientForServiceAccount(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nodehealth-controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := env.Client.RbacV1().RoleBindings(leaseNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().RoleBindings(leaseNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		deleteLease(t, canaryLeaseName)
	})
	leases := sa.Client.CoordinationV1().Leases(leaseNamespace)
	checkWritesOnlyItsCanary(t, ctx, leases, "renamed-abc", "renamed controller")
}

// An identity granted everything by wildcards (cluster-admin) is not taken
// for the controller: without a node name in its token it is refused like any
// extension, not admitted to the canary.
func TestWildcardIdentityIsNotTheController(t *testing.T) {
	installSecurity(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	const ns, name = "default", "wildcard-admin"
	sa, err := env.ClientForServiceAccount(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		deleteLease(t, canaryLeaseName)
	})
	leases := sa.Client.CoordinationV1().Leases(leaseNamespace)
	// Wait until RBAC admits it (a Get is not admitted by the policy), then
	// the policy alone decides.
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := leases.Get(ctx, "absent", metav1.GetOptions{})
		return err == nil || apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = leases.Create(ctx, newLease(canaryLeaseName, "admin-abc"), metav1.CreateOptions{})
	wantDenied(t, "a cluster-admin ServiceAccount without a node name creates the canary Lease", err, "carries no node name")
}

// checkWritesOnlyItsCanary checks that the controller behind leases (holder
// its identity, who how messages name it) creates and renews its canary
// Lease and is refused an extension Lease. RBAC reaches the authorizer's
// cache asynchronously after an apply, so the first create is retried.
func checkWritesOnlyItsCanary(t *testing.T, ctx context.Context, leases typedcoordinationv1.LeaseInterface, holder, who string) {
	t.Helper()
	var canary *coordinationv1.Lease
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		canary, err = leases.Create(ctx, newLease(canaryLeaseName, holder), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			canary, err = leases.Get(ctx, canaryLeaseName, metav1.GetOptions{})
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s creates its canary Lease: %v", who, err)
	}
	canary.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = leases.Update(ctx, canary, metav1.UpdateOptions{})
	wantAllowed(t, who+" renews its canary Lease", err)

	createNode(t, "n1")
	_, err = leases.Create(ctx, newLease("kube-proxy.n1", holder), metav1.CreateOptions{})
	wantDenied(t, who+" creates an extension Lease", err, "writes only its canary Lease")
}
