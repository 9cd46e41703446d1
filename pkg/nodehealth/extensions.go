package nodehealth

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// registration is an extension that asked, through a label on its Lease, to be
// added to its node's list.
type registration struct {
	extension        string
	affectsReadiness bool
	// created is the Lease's creation time: when more extensions register
	// than a list holds, the oldest keep their place.
	created time.Time
}

// desiredExtensions returns the list a node should carry: every manual entry as
// it is; one entry per rule that matches the node (unless a manual entry has
// the same name: the manual one wins); one entry per self-registered Lease
// whose name is not taken by a manual or rule entry. Rule and Lease entries
// that no longer apply are dropped; manual entries never are. Registrations
// fill what rule and manual entries leave of the list's limit, oldest first;
// dropped names the registrations that did not fit.
func desiredExtensions(current []nodev1alpha1.SystemExtension, node *v1.Node, rules []Rule, registered []registration, namespace string) (list []nodev1alpha1.SystemExtension, dropped []string) {
	out := make([]nodev1alpha1.SystemExtension, 0, len(current)+len(rules))
	taken := map[string]bool{}
	for _, e := range current {
		if e.Source == nodev1alpha1.SourceManual {
			out = append(out, e)
			taken[e.Name] = true
		}
	}
	nodeLabels := labels.Set(node.Labels)
	// Rules are applied in name order so that two rules requiring the same
	// extension always resolve the same way.
	sorted := append([]Rule(nil), rules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, r := range sorted {
		if taken[r.Extension] || !r.Selector.Matches(nodeLabels) {
			continue
		}
		e := nodev1alpha1.SystemExtension{Name: r.Extension, Source: nodev1alpha1.RuleSource(r.Name)}
		if !r.AffectsReadiness {
			f := false
			e.AffectsReadiness = &f
		}
		if r.LeaseName != nil {
			e.Lease = &nodev1alpha1.LeaseReference{Namespace: namespace, Name: r.LeaseName(node.Name)}
		}
		out = append(out, e)
		taken[r.Extension] = true
	}
	sort.Slice(registered, func(i, j int) bool {
		if !registered[i].created.Equal(registered[j].created) {
			return registered[i].created.Before(registered[j].created)
		}
		return registered[i].extension < registered[j].extension
	})
	for _, reg := range registered {
		if taken[reg.extension] {
			continue
		}
		if len(out) >= nodev1alpha1.MaxSystemExtensions {
			dropped = append(dropped, reg.extension)
			continue
		}
		e := nodev1alpha1.SystemExtension{Name: reg.extension, Source: nodev1alpha1.SourceLease}
		if !reg.affectsReadiness {
			f := false
			e.AffectsReadiness = &f
		}
		out = append(out, e)
		taken[reg.extension] = true
	}
	return nodev1alpha1.NormalizeSystemExtensions(out, node.Name, namespace), dropped
}

// requiredExtension is one entry of a node's list, resolved for evaluation.
type requiredExtension struct {
	name    string
	lease   nodev1alpha1.LeaseReference
	affects bool
	// rule is the rule that injected the entry, for its startup timeout; nil
	// for manual and self-registered entries.
	rule *Rule
}

func resolveExtensions(list []nodev1alpha1.SystemExtension, nodeName, namespace string, rules map[string]*Rule) []requiredExtension {
	out := make([]requiredExtension, 0, len(list))
	for i := range list {
		e := &list[i]
		r := requiredExtension{name: e.Name, lease: e.LeaseFor(nodeName, namespace), affects: e.ReadinessAffected()}
		if name, ok := nodev1alpha1.RuleFromSource(e.Source); ok {
			r.rule = rules[name]
		}
		out = append(out, r)
	}
	return out
}
