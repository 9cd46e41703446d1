package nodehealth

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/flowcontrol"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// In a dry run the node never holds the condition the controller would
// write; that is not drift, and a steady state counts nothing.
func TestDryRunConditionIsCountedOnTransitionsOnly(t *testing.T) {
	opts := testOptions()
	opts.DryRun = true
	f := newFixture(t, opts, newNode("n1"))
	f.live("n1")
	f.sync("n1")
	before := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("condition"))
	for range 3 {
		f.sync("n1")
	}
	if got := testutil.ToFloat64(f.c.metrics.DryRunActions.WithLabelValues("condition")); got != before {
		t.Fatalf("dry_run_actions_total{condition} grew from %v to %v at steady state", before, got)
	}
}

// A boot record write waits for the dead marks' rate limit only when the
// marks are all it changes. The record of another boot goes out at once,
// though its marks differ too: held back, a node in service kept the record
// of its previous boot, which a controller restarted meanwhile takes for a
// reboot while it was down (simulation seed 8831765713037781631).
func TestOnlyABootRecordWriteOfDeadMarksAloneWaitsForTheDeadMarksLimit(t *testing.T) {
	f := newFixture(t, testOptions(), readyNodes("n1")...)
	f.c.deadMarks = flowcontrol.NewFakeNeverRateLimiter()
	node := f.node("n1").DeepCopy()
	marked := bootRecord{BootID: "boot-1", UID: node.UID, Dead: map[string]int64{"kube-proxy": 1}}
	statuses := []extensionStatus{{name: "kube-proxy", gating: true, affects: true}}
	for _, tc := range []struct {
		name  string
		want  bootRecord
		write bool
	}{
		{"the dead mark goes, same boot", bootRecord{BootID: "boot-1", UID: node.UID}, false},
		{"a new boot, without the old boot's mark", bootRecord{BootID: "boot-2", UID: node.UID}, true},
		{"the same boot, a fail-open recorded with the mark gone", bootRecord{BootID: "boot-1", UID: node.UID, FailedOpen: []string{"cni"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node.Annotations[nodev1alpha1.BootAnnotation] = marked.String()
			d := decision{statuses: statuses, record: tc.want, recordBoot: true, deadMarksChanged: true}
			if got := f.c.bootRecordToWrite(node, d) != nil; got != tc.write {
				t.Errorf("written now: %v, want %v", got, tc.write)
			}
		})
	}
}
