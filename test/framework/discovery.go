package framework

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// ServesResource reports whether the API server serves resource (its plural
// name, e.g. "mutatingadmissionpolicies") in groupVersion (e.g.
// "admissionregistration.k8s.io/v1"), by asking its discovery API.
//
// Tests that need an API a supported Kubernetes release may lack (make
// test-compat runs them against the oldest one) skip on this answer, never on
// the server's version string: what a server serves also depends on its
// feature gates and --runtime-config.
func (e *Environment) ServesResource(ctx context.Context, groupVersion, resource string) (bool, error) {
	return ServesResource(ctx, e.Client.Discovery(), groupVersion, resource)
}

// ServesResource is Environment.ServesResource for any discovery client.
func ServesResource(ctx context.Context, d discovery.DiscoveryInterface, groupVersion, resource string) (bool, error) {
	var list metav1.APIResourceList
	// The RESTClient call (rather than ServerResourcesForGroupVersion) takes ctx,
	// and a group version the server does not serve is a plain 404.
	path := "/apis/" + groupVersion
	if groupVersion == "v1" {
		path = "/api/v1"
	}
	err := d.RESTClient().Get().AbsPath(path).Do(ctx).Into(&list)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering the resources of %s: %w", groupVersion, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}
