package uninstall

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Plan is a whole uninstall: what to stop first, then the nodes' cleanup.
// "nodehealth-controller uninstall" (the chart's pre-delete hook) and
// "kubectl nodehealth uninstall" (the workstation's fallback) both run one.
type Plan struct {
	// DeleteBindings are MutatingAdmissionPolicyBindings to delete first,
	// so that no new Node is tainted at creation.
	DeleteBindings []string
	// StopDeployments are Deployments to scale to 0, waiting until none of
	// their pods is left (each within StopTimeout), so that the controller
	// does not put back what is removed.
	StopDeployments []types.NamespacedName
	StopTimeout     time.Duration
	// TaintKey and LeaseNamespace are the controller's configuration.
	TaintKey, LeaseNamespace string
}

// DefaultPlan is the plan of a default installation (the chart's and
// deploy/'s names).
func DefaultPlan() Plan {
	return Plan{
		DeleteBindings:  []string{"nodehealth-readiness-taint-on-create"},
		StopDeployments: []types.NamespacedName{{Namespace: "nodehealth-system", Name: "nodehealth-controller"}},
		StopTimeout:     2 * time.Minute,
		TaintKey:        nodev1alpha1.DefaultReadinessTaintKey,
		LeaseNamespace:  nodev1alpha1.DefaultLeaseNamespace,
	}
}

// Run runs the plan, saying what it does on out, and ends with a summary
// of what it changed. Objects already gone are no error: a second run, or a
// run after "helm uninstall --no-hooks", only cleans the nodes.
func (p Plan) Run(ctx context.Context, client kubernetes.Interface, out io.Writer) error {
	logf := func(format string, args ...interface{}) { fmt.Fprintf(out, format+"\n", args...) }
	for _, name := range p.DeleteBindings {
		if err := DeleteMutatingAdmissionPolicyBinding(ctx, client, name, logf); err != nil {
			return err
		}
	}
	for _, d := range p.StopDeployments {
		stopCtx, cancel := context.WithTimeout(ctx, p.StopTimeout)
		err := StopDeployment(stopCtx, client, d.Namespace, d.Name, time.Second, logf)
		cancel()
		if err != nil {
			return err
		}
	}
	res, err := Uninstall(ctx, client, p.TaintKey, p.LeaseNamespace, logf)
	fmt.Fprintf(out, "changed %d nodes: removed %d taints, %d annotations, %d conditions\n", res.Nodes, res.Taints, res.Annotations, res.Conditions)
	if len(res.Skipped) > 0 {
		fmt.Fprintf(out, "left the unparsable %s annotation on: %v\n", nodev1alpha1.SystemExtensionsAnnotation, res.Skipped)
	}
	return err
}

// ParseDeployments reads namespace/name references (--stop-deployment).
func ParseDeployments(refs []string) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	for _, ref := range refs {
		namespace, name, ok := strings.Cut(ref, "/")
		if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("deployment %q: want namespace/name", ref)
		}
		out = append(out, types.NamespacedName{Namespace: namespace, Name: name})
	}
	return out, nil
}
