package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NewKwokNode returns a Node object kwok will simulate: annotated for kwok and
// labelled like a kubelet would label it, plus labels. Create it yourself to change
// more (taints, other annotations); CreateNode is the usual shortcut.
func NewKwokNode(name string, labels map[string]string) *corev1.Node {
	n := NewUnmanagedNode(name, labels)
	n.Annotations = map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue}
	n.Labels["type"] = "kwok"
	return n
}

// NewUnmanagedNode returns a Node object nothing simulates: it never becomes Ready and
// its status is whatever the test writes.
func NewUnmanagedNode(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	maps.Copy(l, labels)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// CreateNode creates a kwok-simulated node. kwok then makes it Ready, renews its Lease
// in kube-node-lease and runs the pods bound to it; node-lifecycle-controller removes
// the not-ready taint. Wait for that with WaitForNode(ctx, name, NodeSchedulable), or
// use CreateReadyNode.
func (e *Environment) CreateNode(ctx context.Context, name string, labels map[string]string) (*corev1.Node, error) {
	n, err := e.Client.CoreV1().Nodes().Create(ctx, NewKwokNode(name, labels), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	return n, nil
}

// CreateReadyNode creates a kwok-simulated node and waits until pods can be scheduled
// onto it (Ready, not-ready taint removed).
func (e *Environment) CreateReadyNode(ctx context.Context, name string, labels map[string]string) (*corev1.Node, error) {
	if _, err := e.CreateNode(ctx, name, labels); err != nil {
		return nil, err
	}
	return e.WaitForNode(ctx, name, NodeSchedulable)
}

// DeleteNode deletes a node; a node that does not exist is not an error.
func (e *Environment) DeleteNode(ctx context.Context, name string) error {
	err := e.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}

// SetBootID sets status.nodeInfo.bootID, which is how a reboot shows in the API: the
// kubelet reports a new boot ID after every boot. kwok keeps the value: its stages
// either do not write nodeInfo or carry an existing bootID over.
func (e *Environment) SetBootID(ctx context.Context, node, bootID string) (*corev1.Node, error) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"bootID": bootID}}})
	if err != nil {
		return nil, err
	}
	n, err := e.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("setting bootID of node %s: %w", node, err)
	}
	return n, nil
}

// CreateNamespace creates a namespace named generateName-<random suffix>. Tests share
// one control plane and are isolated by namespace.
func (e *Environment) CreateNamespace(ctx context.Context, generateName string) (*corev1.Namespace, error) {
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating namespace %s-*: %w", generateName, err)
	}
	return ns, nil
}

// DeleteNamespace deletes a namespace (kube-controller-manager then empties it;
// kwok removes its pods at once). A missing namespace is not an error.
func (e *Environment) DeleteNamespace(ctx context.Context, name string) error {
	err := e.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	return nil
}
