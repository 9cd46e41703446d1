package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// NewNodeInformerFactory is the informer factory of the operator's Node
// informer: every Node passes nodeutil.TransformNode before it is stored, so
// the cache holds only what the operator reads. The binary and the
// simulation both build the Node informer here, so that the simulated
// operator decides on the same trimmed Nodes as the one users run.
func NewNodeInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(nodeutil.TransformNode))
}

// NewHookJobInformerFactory is the informer factory of the hooks' Jobs: the
// hooks' namespace only, the operator's Jobs only, which is all its RBAC
// lets it list.
func NewHookJobInformerFactory(client kubernetes.Interface, namespace string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = HookLabel }))
}
