package nodeutil

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeStatuses is what PatchConditions needs: a clientset's CoreV1().Nodes()
// has it.
type NodeStatuses interface {
	PatchStatus(ctx context.Context, nodeName string, data []byte) (*v1.Node, error)
}

// PatchConditions sets conds on node with one strategic merge patch of its
// status: conditions merge by type, so the kubelet's and other writers'
// conditions are never touched. Each keeps its lastTransitionTime (as node
// shows it) when its status does not change; both times are now otherwise.
// A resourceVersion, when given, makes the patch fail with a conflict if the
// node changed since that read. conds is modified (its times). It returns
// the node as the patch left it.
func PatchConditions(ctx context.Context, nodes NodeStatuses, node *v1.Node, conds []v1.NodeCondition, now time.Time, resourceVersion string) (*v1.Node, error) {
	stamp := metav1.NewTime(now)
	types := make([]string, 0, len(conds))
	for i := range conds {
		cond := &conds[i]
		cond.LastHeartbeatTime, cond.LastTransitionTime = stamp, stamp
		if cur := Condition(node, cond.Type); cur != nil && cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		types = append(types, string(cond.Type))
	}
	patch := map[string]interface{}{"status": map[string]interface{}{"conditions": conds}}
	if resourceVersion != "" {
		patch["metadata"] = map[string]interface{}{"resourceVersion": resourceVersion}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	patched, err := nodes.PatchStatus(ctx, node.Name, data)
	if err != nil {
		return nil, fmt.Errorf("writing condition %s of node %s: %w", strings.Join(types, ", "), node.Name, err)
	}
	return patched, nil
}

// OwnLastWrite is the condition of type kind as a writer's last write left
// it, where the informer's copy (cached) shows it absent or as the writer's
// own (ours): the copy can lag behind the write, showing nothing yet or
// what an earlier write said. wrote is the status the last write gave kind,
// with reason; "" when this process knows of no write. Another writer's
// condition is returned as the copy shows it. A writer never writes False
// on an absent condition, so a False write leaves an absent one absent.
func OwnLastWrite(cached *v1.NodeCondition, kind v1.NodeConditionType, ours func(reason string) bool, wrote v1.ConditionStatus, reason string) *v1.NodeCondition {
	switch {
	case wrote == "" || cached != nil && !ours(cached.Reason):
		return cached
	case wrote == v1.ConditionFalse && cached == nil:
		return nil
	}
	return &v1.NodeCondition{Type: kind, Status: wrote, Reason: reason}
}
