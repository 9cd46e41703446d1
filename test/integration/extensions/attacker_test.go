package extensions_test

import (
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// Security tried as an attacker on a node would (issue 13, item 9): the
// attacker holds the real pod-bound token of an extension (kube-proxy's
// ServiceAccount, bound to the extension roles exactly as deploy/examples/
// binds them) of a pod on node atk-n1, and tries to act on other nodes. Each
// attempt is one test asserting the exact denial; docs/extensions-security.md
// lists them. The update agent's own token is tried in
// test/integration/agent (TestShadowStatusOwnNodeOnly and its neighbours).

const (
	atkNode    = "atk-n1"
	atkOther   = "atk-n2"
	atkDotted  = "b." + atkNode
	atkSA      = "kube-proxy"
	atkPodName = "kube-proxy-atk-n1"
)

type attacker struct {
	client kubernetes.Interface
	sa     *framework.ServiceAccountClient
	user   string
}

// newAttacker creates nodes atk-n1, atk-n2 and b.atk-n1 and returns the
// pod-bound token of an extension on atk-n1, once RBAC admits it.
func newAttacker(t *testing.T) attacker {
	t.Helper()
	installSecurity(t)
	ctx := testenv.Context(t)
	for _, n := range []string{atkNode, atkOther, atkDotted} {
		createNode(t, n)
	}
	ns := testenv.NewNamespace(t, "attacker")
	if err := bindExtensionRoles(t, ctx, ns, atkSA); err != nil {
		t.Fatal(err)
	}
	sa, err := testenv.Env(t).ClientForPodServiceAccount(ctx, ns, atkSA, atkPodName, atkNode)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForLeaseAccess(ctx, sa.Client); err != nil {
		t.Fatal(err)
	}
	// The token is what a kubelet would mount: it names the pod's node.
	review, err := sa.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != atkNode {
		t.Fatalf("token's node-name = %v, want [%s]", got, atkNode)
	}
	return attacker{client: sa.Client, sa: sa, user: "system:serviceaccount:" + ns + ":" + atkSA}
}

// policyDenial is the message of the Lease policy's own-node check.
func (a attacker) policyDenial(lease string) string {
	return fmt.Sprintf("%s on node %s may write only Leases named <extension>.%s, not %s", a.user, atkNode, atkNode, lease)
}

// wantForbidden fails unless err is RBAC's 403 for exactly this request.
func (a attacker) wantForbidden(t *testing.T, what string, err error, verb, resource, group, scope string) {
	t.Helper()
	want := fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", a.user, verb, resource, group, scope)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want 403 Forbidden %q", what, err, want)
	}
}

func TestAttackerCannotWriteAnotherNodesLease(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	leases := a.client.CoordinationV1().Leases(leaseNamespace)
	name := "x." + atkOther
	t.Cleanup(func() { deleteLease(t, name) })
	_, err := leases.Create(ctx, newLease(name, "attacker"), metav1.CreateOptions{})
	wantDenied(t, "create "+name, err, a.policyDenial(name))

	// Nor take over, renew or release the Lease the real extension of
	// atk-n2 holds.
	if _, err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease(name, "owner"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = leases.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"holderIdentity":"attacker"}}`), metav1.PatchOptions{})
	wantDenied(t, "take over "+name, err, a.policyDenial(name))
	_, err = leases.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"holderIdentity":""}}`), metav1.PatchOptions{})
	wantDenied(t, "release "+name, err, a.policyDenial(name))
}

func TestAttackerCannotWriteDottedSuffixLease(t *testing.T) {
	a := newAttacker(t)
	name := "x." + atkDotted // node b.atk-n1's Lease; its name ends in ".atk-n1"
	t.Cleanup(func() { deleteLease(t, name) })
	_, err := a.client.CoordinationV1().Leases(leaseNamespace).Create(testenv.Context(t), newLease(name, "attacker"), metav1.CreateOptions{})
	wantDenied(t, "create "+name, err, a.policyDenial(name))
}

func TestAttackerCannotWriteLeasesInOtherNamespaces(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	for _, ns := range []string{v1.NamespaceNodeLease, metav1.NamespaceDefault, metav1.NamespaceSystem} {
		l := newLease("x."+atkNode, "attacker")
		l.Namespace = ns
		_, err := a.client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
		a.wantForbidden(t, "create a Lease in "+ns, err, "create", "leases", "coordination.k8s.io", fmt.Sprintf("in the namespace %q", ns))
	}
	// The kubelet's own node Lease, which node-lifecycle-controller reads.
	_, err := a.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Patch(ctx, atkOther, types.MergePatchType,
		[]byte(`{"spec":{"holderIdentity":"attacker"}}`), metav1.PatchOptions{})
	a.wantForbidden(t, "patch kube-node-lease/"+atkOther, err, "patch", "leases", "coordination.k8s.io", fmt.Sprintf("in the namespace %q", v1.NamespaceNodeLease))
}

func TestAttackerCannotDeleteAnotherNodesLease(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	name := "kube-proxy." + atkOther
	if _, err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease(name, "owner"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLease(t, name) })
	leases := a.client.CoordinationV1().Leases(leaseNamespace)
	wantDenied(t, "delete "+name, leases.Delete(ctx, name, metav1.DeleteOptions{}), a.policyDenial(name))
	err := leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	a.wantForbidden(t, "deletecollection", err, "deletecollection", "leases", "coordination.k8s.io", fmt.Sprintf("in the namespace %q", leaseNamespace))
	if _, err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Lease of %s is gone: %v", atkOther, err)
	}
}

// Self-registration goes through the Lease's name, so it is held to the
// same own-node rule: neither a new self-registering Lease for atk-n2 nor the
// register label added to atk-n2's existing Lease is admitted. A label naming
// another node on an own-node Lease is admitted but changes nothing: the
// controller reads the node from the name only (TestRegistrationFollowsTheName
// in pkg/nodehealth).
func TestAttackerCannotSelfRegisterOntoAnotherNode(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	leases := a.client.CoordinationV1().Leases(leaseNamespace)
	name := "rogue." + atkOther
	l := newLease(name, "attacker")
	l.Labels[nodev1alpha1.RegisterLabel] = "true"
	t.Cleanup(func() { deleteLease(t, name) })
	_, err := leases.Create(ctx, l, metav1.CreateOptions{})
	wantDenied(t, "create self-registering "+name, err, a.policyDenial(name))

	existing := "kube-proxy." + atkOther
	if _, err := testenv.Env(t).Client.CoordinationV1().Leases(leaseNamespace).Create(ctx, newLease(existing, "owner"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteLease(t, existing) })
	_, err = leases.Patch(ctx, existing, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+nodev1alpha1.RegisterLabel+`":"true","`+nodev1alpha1.AffectsReadinessLabel+`":"true"}}}`), metav1.PatchOptions{})
	wantDenied(t, "add the register label to "+existing, err, a.policyDenial(existing))
}

func TestAttackerCannotWriteNodes(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	nodes := a.client.CoreV1().Nodes()
	cluster := "at the cluster scope"
	for _, n := range []string{atkNode, atkOther} {
		_, err := nodes.Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"taints":[]}}`), metav1.PatchOptions{})
		a.wantForbidden(t, "remove the taints of "+n, err, "patch", "nodes", "", cluster)
		_, err = nodes.Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+nodev1alpha1.SystemExtensionsAnnotation+`":"[]"}}}`), metav1.PatchOptions{})
		a.wantForbidden(t, "empty the extension list of "+n, err, "patch", "nodes", "", cluster)
		_, err = nodes.Patch(ctx, n, types.MergePatchType, []byte(`{"status":{"conditions":[]}}`), metav1.PatchOptions{}, "status")
		a.wantForbidden(t, "patch the status of "+n, err, "patch", "nodes/status", "", cluster)
		a.wantForbidden(t, "delete "+n, nodes.Delete(ctx, n, metav1.DeleteOptions{}), "delete", "nodes", "", cluster)
	}
	_, err := nodes.Create(ctx, framework.NewUnmanagedNode("atk-new", nil), metav1.CreateOptions{})
	a.wantForbidden(t, "create a Node", err, "create", "nodes", "", cluster)
}

func TestAttackerCannotWriteAnotherNodesShadowStatus(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	env := testenv.Env(t)
	if err := env.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	shadow := &updatesv1alpha1.BottlerocketShadow{ObjectMeta: metav1.ObjectMeta{Name: atkOther},
		Spec: updatesv1alpha1.BottlerocketShadowSpec{State: updatesv1alpha1.StateIdle}}
	if _, err := admin.UpdatesV1alpha1().BottlerocketShadows().Create(ctx, shadow, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.UpdatesV1alpha1().BottlerocketShadows().Delete(ctx, atkOther, metav1.DeleteOptions{})
	})
	c, err := versioned.NewForConfig(a.sa.Config)
	if err != nil {
		t.Fatal(err)
	}
	shadows := c.UpdatesV1alpha1().BottlerocketShadows()
	_, err = shadows.Patch(ctx, atkOther, types.MergePatchType, []byte(`{"status":{"currentState":"Idle","targetVersion":"9.9.9"}}`), metav1.PatchOptions{}, "status")
	a.wantForbidden(t, "patch the status of shadow "+atkOther, err, "patch", "bottlerocketshadows/status", updatesv1alpha1.GroupName, "at the cluster scope")
	_, err = shadows.Patch(ctx, atkOther, types.MergePatchType, []byte(`{"spec":{"state":"Idle"}}`), metav1.PatchOptions{})
	a.wantForbidden(t, "patch the spec of shadow "+atkOther, err, "patch", "bottlerocketshadows", updatesv1alpha1.GroupName, "at the cluster scope")
}

// Nothing to climb with: the token cannot read other nodes' Leases in bulk,
// mint tokens for other service accounts, list pods or evict them.
func TestAttackerCannotEscalate(t *testing.T) {
	a := newAttacker(t)
	ctx := testenv.Context(t)
	_, err := a.client.CoordinationV1().Leases(leaseNamespace).List(ctx, metav1.ListOptions{})
	a.wantForbidden(t, "list Leases", err, "list", "leases", "coordination.k8s.io", fmt.Sprintf("in the namespace %q", leaseNamespace))
	_, err = a.client.CoordinationV1().Leases(leaseNamespace).Watch(ctx, metav1.ListOptions{})
	a.wantForbidden(t, "watch Leases", err, "watch", "leases", "coordination.k8s.io", fmt.Sprintf("in the namespace %q", leaseNamespace))
	_, err = a.client.CoreV1().ServiceAccounts("nodehealth-update-agent").CreateToken(ctx, "update-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	a.wantForbidden(t, "mint an update-agent token", err, "create", "serviceaccounts/token", "", `in the namespace "nodehealth-update-agent"`)
	_, err = a.client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	a.wantForbidden(t, "list pods", err, "list", "pods", "", `in the namespace "default"`)
	err = a.client.CoreV1().Pods(metav1.NamespaceDefault).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "any", Namespace: metav1.NamespaceDefault}})
	a.wantForbidden(t, "evict a pod", err, "create", "pods/eviction", "", `in the namespace "default"`)
}
