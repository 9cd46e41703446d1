package nodehealth_test

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// extensionListDiff compares the extension list the controller keeps on a
// node (its annotation) with what the running configuration and the
// registrations ask for: the extension of each rule whose selector matches
// the node, and each extension that self-registers on it with a Lease the
// controller's informer holds. The model takes a registration from the
// node's creation and cannot tell when the controller lists it
// (listedByController), so the listing is compared here, once a second.
//
// It says nothing ("") while the controller cannot have caught up with the
// node: the node is excluded (its list is left as it was), a sync or an
// eviction of it failed and waits for its retry, or someone else's write is
// not in the controller's Node cache yet. The caller leaves out the seconds
// after an outage of the writes and those with no leader.
func (s *simulation) extensionListDiff(n *simNode, obj *v1.Node) string {
	if obj.Labels[nodev1alpha1.ExcludeLabel] == "true" || s.retryOwed(n.name) || !s.cacheCaughtUp(n.name) {
		return ""
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(obj.Annotations[nodev1alpha1.SystemExtensionsAnnotation], simNS)
	if err != nil {
		return fmt.Sprintf("%s: the controller's extension list does not parse: %v", n.name, err)
	}
	got := sets.New[string]()
	for _, e := range list {
		got.Insert(e.Name)
	}
	want := sets.New[string]()
	for _, r := range s.opts.Rules {
		if r.Selector.Matches(labels.Set(obj.Labels)) {
			want.Insert(r.Extension)
		}
	}
	for _, a := range n.agents {
		if !a.registered {
			continue
		}
		l, err := s.leaseLister.Leases(simNS).Get(a.leaseName(n))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			s.t.Fatal(err)
		}
		if l.DeletionTimestamp == nil && l.Labels[nodev1alpha1.RegisterLabel] == "true" {
			want.Insert(a.ext)
		}
	}
	if got.Equal(want) {
		return ""
	}
	return fmt.Sprintf("%s: the controller's extension list names [%s], the rules and registrations ask for [%s] (list)",
		n.name, strings.Join(sets.List(got), " "), strings.Join(sets.List(want), " "))
}
