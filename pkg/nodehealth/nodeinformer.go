package nodehealth

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// NewNodeInformerFactory is the informer factory of the controller's Node
// informer: every Node passes nodeutil.TransformNode before it is stored, so
// the cache holds only what the controller reads, and selector (a label
// selector; empty is every node) limits the nodes it lists. The binary and
// the simulation both build the Node informer here, so that the simulated
// controller decides on the same trimmed Nodes as the one users run.
func NewNodeInformerFactory(client kubernetes.Interface, selector string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(nodeutil.TransformNode),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
}
