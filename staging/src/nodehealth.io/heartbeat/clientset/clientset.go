// Package clientset adapts a client-go clientset to the heartbeat's Client,
// for a process that already has one: the renewer then shares its
// connections and costs nothing more. A process without a clientset uses
// heartbeat.NewClient instead and never links this package, nor the typed
// clients of every API group a clientset brings.
package clientset

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Client implements heartbeat.Client with a kubernetes.Interface.
type Client struct {
	cs kubernetes.Interface
}

// New returns cs as a heartbeat.Client:
//
//	r, err := heartbeat.New(clientset.New(cs), heartbeat.Options{...})
func New(cs kubernetes.Interface) *Client { return &Client{cs: cs} }

// GetLease gets the Lease namespace/name.
func (c *Client) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	return c.cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateLease creates lease in its namespace.
func (c *Client) CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.cs.CoordinationV1().Leases(lease.Namespace).Create(ctx, lease, metav1.CreateOptions{})
}

// UpdateLease updates lease (a conflict when its resourceVersion is stale).
func (c *Client) UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return c.cs.CoordinationV1().Leases(lease.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
}

// ReviewSelf creates a SelfSubjectReview and returns its user.
func (c *Client) ReviewSelf(ctx context.Context) (*authenticationv1.UserInfo, error) {
	review, err := c.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return &review.Status.UserInfo, nil
}

// NodeUID reads the Node name and returns its UID.
func (c *Client) NodeUID(ctx context.Context, name string) (types.UID, error) {
	node, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return node.UID, nil
}
