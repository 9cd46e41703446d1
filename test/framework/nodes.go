package framework

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// The node predicates below read what nodehealth writes on a Node: the
// readiness taint and the SystemExtensionsReady condition. Suites combine them
// with WaitForNode and AllOf instead of each spelling out the taint loop.

// TaintCount counts the taints with key and effect on n; an empty effect
// counts every effect. Counting, not just finding, is what lets a test catch
// a duplicated taint.
func TaintCount(n *corev1.Node, key string, effect corev1.TaintEffect) int {
	count := 0
	for _, t := range n.Spec.Taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			count++
		}
	}
	return count
}

// ReadinessTaints counts nodehealth's readiness taint (the default key) on n
// with effect; an empty effect counts every effect.
func ReadinessTaints(n *corev1.Node, effect corev1.TaintEffect) int {
	return TaintCount(n, nodev1alpha1.DefaultReadinessTaintKey, effect)
}

// HasReadinessTaint reports whether n carries the readiness taint with any effect.
func HasReadinessTaint(n *corev1.Node) bool { return ReadinessTaints(n, "") > 0 }

// ExtensionsCondition returns n's SystemExtensionsReady condition, nil when
// the controller has not written one.
func ExtensionsCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == nodev1alpha1.SystemExtensionsReadyCondition {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// ExtensionsReady returns the status of n's SystemExtensionsReady condition,
// "" when there is none.
func ExtensionsReady(n *corev1.Node) corev1.ConditionStatus {
	if c := ExtensionsCondition(n); c != nil {
		return c.Status
	}
	return ""
}

// NodeGated reports whether the controller keeps workloads off n: the
// readiness taint is on and SystemExtensionsReady is False.
func NodeGated(n *corev1.Node) bool {
	return HasReadinessTaint(n) && ExtensionsReady(n) == corev1.ConditionFalse
}

// NodeServing reports whether the controller lets workloads onto n: no
// readiness taint and SystemExtensionsReady True.
func NodeServing(n *corev1.Node) bool {
	return !HasReadinessTaint(n) && ExtensionsReady(n) == corev1.ConditionTrue
}

// ExtensionsConditionIs matches the SystemExtensionsReady condition by status,
// reason (any when empty) and substrings of its message; a substring starting
// with "!" must be absent.
func ExtensionsConditionIs(status corev1.ConditionStatus, reason string, message ...string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		c := ExtensionsCondition(n)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return false
		}
		for _, m := range message {
			if absent, ok := strings.CutPrefix(m, "!"); ok {
				if strings.Contains(c.Message, absent) {
					return false
				}
			} else if !strings.Contains(c.Message, m) {
				return false
			}
		}
		return true
	}
}

// AllOf matches a node every one of conds matches.
func AllOf(conds ...func(*corev1.Node) bool) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		for _, c := range conds {
			if !c(n) {
				return false
			}
		}
		return true
	}
}
