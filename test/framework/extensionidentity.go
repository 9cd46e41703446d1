package framework

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// A system extension's heartbeat runs, in a cluster, as the extension's pod:
// its ServiceAccount is bound to deploy/extensions' Role and ClusterRole, and
// that folder's admission policy limits it to its own node's Leases. The
// helpers below give tests and the sandbox the same: the extension's
// ServiceAccount and bindings, a DaemonSet whose pod on each node kwok
// "runs", and (podidentity.go) a token bound to the node's pod. A missing
// rule then fails there as it would in a cluster, instead of passing on the
// admin's rights.

// ExtensionIdentity is the DaemonSet InstallExtensionIdentity runs for
// extension ext in namespace.
func ExtensionIdentity(namespace, ext string) PodIdentity {
	return PodIdentity{Namespace: namespace, Selector: "app.kubernetes.io/name=" + ext}
}

// InstallExtensionSecurity applies deploy/extensions: the Role and
// ClusterRole every extension's ServiceAccount is bound to, and the admission
// policy that narrows them to the Leases of the extension's own node.
func (e *Environment) InstallExtensionSecurity(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodev1alpha1.DefaultLeaseNamespace}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	if out, err := e.Kubectl(ctx, "apply", "--server-side", "-k", "deploy/extensions/"); err != nil {
		return fmt.Errorf("installing deploy/extensions: %w\n%s", err, out)
	}
	return nil
}

// InstallExtensionIdentity creates extension ext's ServiceAccount in
// namespace, binds it as deploy/examples binds kube-proxy's, and runs its
// DaemonSet on the nodes on selects (a pause container that kwok "runs";
// NodeNames selects nodes by name). It returns the
// identity a heartbeat of ext runs as (DaemonSetPod, WritePodKubeconfig).
// Installing it again (a sandbox restarted on the same directory) updates it.
// InstallExtensionSecurity must have run.
func (e *Environment) InstallExtensionIdentity(ctx context.Context, namespace, ext string, on corev1.NodeSelector) (PodIdentity, error) {
	id := ExtensionIdentity(namespace, ext)
	labels := map[string]string{"app.kubernetes.io/name": ext}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ext, Namespace: id.Namespace, Labels: labels}}
	if _, err := e.Client.CoreV1().ServiceAccounts(id.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return id, fmt.Errorf("ServiceAccount %s/%s: %w", id.Namespace, ext, err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ext, Namespace: id.Namespace}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ext + "-heartbeat", Namespace: nodev1alpha1.DefaultLeaseNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nodehealth-extension-lease"},
		Subjects:   subjects,
	}
	if _, err := e.Client.RbacV1().RoleBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return id, fmt.Errorf("RoleBinding %s/%s: %w", rb.Namespace, rb.Name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ext + "-heartbeat"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nodehealth-extension-identity"},
		Subjects:   subjects,
	}
	if _, err := e.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return id, fmt.Errorf("ClusterRoleBinding %s: %w", crb.Name, err)
	}
	ds := extensionDaemonSet(ext, id.Namespace, labels, on)
	dss := e.Client.AppsV1().DaemonSets(id.Namespace)
	if _, err := dss.Create(ctx, ds, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := dss.Get(ctx, ext, metav1.GetOptions{})
		if err != nil {
			return id, err
		}
		old.Spec.Template = ds.Spec.Template
		_, err = dss.Update(ctx, old, metav1.UpdateOptions{})
		return id, err
	} else if err != nil {
		return id, fmt.Errorf("DaemonSet %s/%s: %w", id.Namespace, ext, err)
	}
	return id, nil
}

// extensionDaemonSet is the stand-in for extension ext's DaemonSet: a pause
// container on the nodes on selects, tolerating every taint as kube-proxy's
// does (the readiness taint included: an extension must run on a gated node).
func extensionDaemonSet(ext, namespace string, labels map[string]string, on corev1.NodeSelector) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: ext, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: ext,
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &on,
					}},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:                    []corev1.Container{{Name: ext, Image: "registry.k8s.io/pause:3.10"}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
}

// NodeNames selects exactly nodes: a node field selector takes one value,
// and terms are ORed.
func NodeNames(nodes ...string) corev1.NodeSelector {
	terms := make([]corev1.NodeSelectorTerm, 0, len(nodes))
	for _, n := range nodes {
		terms = append(terms, corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n}}},
		})
	}
	return corev1.NodeSelector{NodeSelectorTerms: terms}
}
