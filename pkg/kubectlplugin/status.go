package kubectlplugin

import (
	"context"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Extension states, the names the node-health controller uses in the
// SystemExtensionsReady condition.
const (
	StateReady         = nodev1alpha1.ExtensionReady
	StateLeaseMissing  = nodev1alpha1.ExtensionLeaseMissing
	StateLeaseReleased = nodev1alpha1.ExtensionLeaseReleased
	StateLeaseExpired  = nodev1alpha1.ExtensionLeaseExpired
	StateNeverRenewed  = nodev1alpha1.ExtensionNeverRenewed
)

// defaultLeaseDuration applies to Leases without spec.leaseDurationSeconds,
// as in the controller.
const defaultLeaseDuration = nodev1alpha1.DefaultLeaseDuration

// clockSkewTolerance is how far in the future a renewTime may be before it
// is flagged: API server, node and this machine never agree to the
// millisecond, and flagging every few hundred milliseconds would be noise.
const clockSkewTolerance = 2 * time.Second

// NodeStatus is what the plugin knows about one node: its gate (the taint and
// the controller's condition) and every extension of its list.
type NodeStatus struct {
	Node string `json:"node"`
	// Gated is true when the node carries the readiness taint.
	Gated bool `json:"gated"`
	// TaintEffects are the effects of the readiness taint on the node
	// (NoSchedule, and NoExecute once the controller escalated).
	TaintEffects []corev1.TaintEffect `json:"taintEffects,omitempty"`
	// Excluded is true when the node opted out (nodehealth.io/exclude=true).
	Excluded bool `json:"excluded,omitempty"`
	// Condition is the controller's SystemExtensionsReady condition; nil
	// when the controller has not written it.
	Condition *Condition `json:"condition,omitempty"`
	// ListError is set when the node's extension list cannot be parsed; the
	// extensions are then unknown.
	ListError  string            `json:"listError,omitempty"`
	Extensions []ExtensionStatus `json:"extensions"`
	// Startup is the node's last start-up as the controller recorded it in
	// the boot record; nil when it recorded none.
	Startup *StartupStatus `json:"startup,omitempty"`
}

// Condition is the node's SystemExtensionsReady condition.
type Condition struct {
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
}

// ExtensionStatus is one extension of a node as seen by this client.
type ExtensionStatus struct {
	Name             string `json:"name"`
	AffectsReadiness bool   `json:"affectsReadiness"`
	// Source is "manual", "lease" or "rule/<rule>".
	Source string `json:"source"`
	// Lease is "namespace/name".
	Lease  string `json:"lease"`
	Holder string `json:"holder,omitempty"`
	// RenewTime is the Lease's own spec.renewTime, written by the extension's
	// clock.
	RenewTime            *metav1.MicroTime `json:"renewTime,omitempty"`
	LeaseDurationSeconds int32             `json:"leaseDurationSeconds,omitempty"`
	// LastRenewalSeconds is the age of RenewTime by this client's clock;
	// negative when RenewTime is in the future.
	LastRenewalSeconds *int64 `json:"lastRenewalSeconds,omitempty"`
	// ClockSkew is true when RenewTime is in the future by this client's
	// clock, by more than a small tolerance.
	ClockSkew bool `json:"clockSkew,omitempty"`
	// State is this client's estimate (see Estimated); Reason and Message
	// come from the Lease's nodehealth.io/reason and nodehealth.io/message
	// annotations, or explain the state.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Estimated is written into every JSON/YAML report, because the controller's
// judgement and this client's can differ.
const Estimated = "Extension states are estimated by this client from each Lease's spec.renewTime " +
	"and the local clock; the node-health controller judges freshness by when it observed each " +
	"renewal, and its SystemExtensionsReady condition is authoritative."

// StatusReport is the -o json|yaml form of `status`.
type StatusReport struct {
	// apiVersion plugin.nodehealth.io/v1alpha1, kind NodeStatusReport: what
	// a script reading -o json or -o yaml checks before it reads on.
	metav1.TypeMeta
	// Time is this client's clock when the report was made; every age is
	// relative to it.
	Time  metav1.Time  `json:"time"`
	Note  string       `json:"note"`
	Nodes []NodeStatus `json:"nodes"`
}

// evalSettings are the inputs of an evaluation besides the objects.
type evalSettings struct {
	leaseNamespace string
	taintKey       string
	renewalGrace   time.Duration
	now            time.Time
}

// leaseGetter returns a Lease or nil when it does not exist.
type leaseGetter func(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)

// evaluateNode computes a node's status from the Node and its Leases. It
// mirrors the controller's per-extension evaluation, except that freshness
// can only be judged from renewTime against this client's clock.
func evaluateNode(ctx context.Context, node *corev1.Node, getLease leaseGetter, s evalSettings) (NodeStatus, error) {
	st := NodeStatus{Node: node.Name, Extensions: []ExtensionStatus{}}
	for _, t := range node.Spec.Taints {
		if t.Key == s.taintKey {
			st.Gated = true
			st.TaintEffects = append(st.TaintEffects, t.Effect)
		}
	}
	st.Excluded = node.Labels[nodev1alpha1.ExcludeLabel] == "true"
	st.Startup = startupOf(node)
	for _, c := range node.Status.Conditions {
		if c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
			st.Condition = &Condition{Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		}
	}
	list, err := nodev1alpha1.DecodeSystemExtensions(node.Annotations[nodev1alpha1.SystemExtensionsAnnotation], s.leaseNamespace)
	if err != nil {
		st.ListError = err.Error()
		return st, nil
	}
	for i := range list {
		e := &list[i]
		ref := e.LeaseFor(node.Name, s.leaseNamespace)
		es := ExtensionStatus{
			Name:             e.Name,
			AffectsReadiness: e.ReadinessAffected(),
			Source:           sourceName(e.Source),
			Lease:            ref.String(),
		}
		lease, err := getLease(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return st, fmt.Errorf("node %s: reading Lease %s: %w", node.Name, ref, err)
		}
		evaluateLease(&es, lease, s)
		st.Extensions = append(st.Extensions, es)
	}
	sort.Slice(st.Extensions, func(i, j int) bool { return st.Extensions[i].Name < st.Extensions[j].Name })
	return st, nil
}

func evaluateLease(es *ExtensionStatus, lease *coordinationv1.Lease, s evalSettings) {
	if lease == nil {
		es.State, es.Message = StateLeaseMissing, "the Lease does not exist"
		return
	}
	if lease.Spec.HolderIdentity != nil {
		es.Holder = *lease.Spec.HolderIdentity
	}
	duration := defaultLeaseDuration
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		es.LeaseDurationSeconds = *d
		duration = time.Duration(*d) * time.Second
	}
	if rt := lease.Spec.RenewTime; rt != nil {
		es.RenewTime = rt.DeepCopy()
		age := s.now.Sub(rt.Time)
		if age < -clockSkewTolerance {
			es.ClockSkew = true
		} else if age < 0 {
			age = 0
		}
		secs := int64(age.Round(time.Second) / time.Second)
		es.LastRenewalSeconds = &secs
	}
	reason := lease.Annotations[nodev1alpha1.ReasonAnnotation]
	message := lease.Annotations[nodev1alpha1.MessageAnnotation]
	switch {
	case es.Holder == "":
		// An empty holder is a release: the extension asks to be treated as
		// not ready now, whatever renewTime says.
		es.State, es.Reason, es.Message = StateLeaseReleased, reason, message
	case lease.Spec.RenewTime == nil:
		es.State, es.Message = StateNeverRenewed, "the Lease has no renewTime"
	case s.now.Sub(lease.Spec.RenewTime.Time) >= duration+s.renewalGrace:
		es.State = StateLeaseExpired
		es.Message = fmt.Sprintf("last renewal %s ago, more than the lease duration %s + grace %s",
			s.now.Sub(lease.Spec.RenewTime.Time).Round(time.Second), duration, s.renewalGrace)
	default:
		es.State = StateReady
		// A healthy extension may still carry the reason of an earlier
		// release; it is not shown for a Ready extension.
	}
	if es.ClockSkew {
		skew := fmt.Sprintf("renewTime is %s ahead of this machine's clock (clock skew)",
			lease.Spec.RenewTime.Time.Sub(s.now).Round(time.Second))
		if es.Message == "" {
			es.Message = skew
		} else {
			es.Message += "; " + skew
		}
	}
}

func sourceName(source string) string {
	if source == nodev1alpha1.SourceManual {
		return "manual"
	}
	return source
}

// statusOf reads the named nodes (every node, by name, when names is empty;
// otherwise in the order given, like kubectl get) and their Leases and
// evaluates them. With explicit names each Lease is read on its
// own; for every node, the Lease namespace is listed once instead of one GET
// per extension and node.
func statusOf(ctx context.Context, client kubernetes.Interface, names []string, s evalSettings) ([]NodeStatus, error) {
	var nodes []corev1.Node
	getLease := func(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
		l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return l, err
	}
	if len(names) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		nodes = list.Items
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
		leases, err := client.CoordinationV1().Leases(s.leaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Leases in %s: %w", s.leaseNamespace, err)
		}
		byName := make(map[string]*coordinationv1.Lease, len(leases.Items))
		for i := range leases.Items {
			byName[leases.Items[i].Name] = &leases.Items[i]
		}
		getLease = func(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
			if namespace != s.leaseNamespace {
				// The codec rejects such references; never reached.
				return nil, fmt.Errorf("lease %s/%s is outside %s", namespace, name, s.leaseNamespace)
			}
			return byName[name], nil
		}
	} else {
		for _, name := range names {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, *n)
		}
	}
	out := make([]NodeStatus, 0, len(nodes))
	for i := range nodes {
		st, err := evaluateNode(ctx, &nodes[i], getLease, s)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
