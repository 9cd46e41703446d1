package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

func testutilCounter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// oldest_state_entered_timestamp_seconds holds, per in-flight spec state,
// the earliest transition into it; Idle nodes and states no node is in have
// no series, and a node leaving a state takes its series with it.
func TestOldestStateEntered(t *testing.T) {
	f := newFixture(t, defaultOptions(), nil, nil)
	header := "# HELP update_operator_oldest_state_entered_timestamp_seconds Unix time at which the node longest in this update state (spec.state StagedAndPerformedUpdate, RebootedIntoUpdate or MonitoringUpdate) entered it; a series exists only while some node is in the state. time() minus it is how long that node has been there.\n" +
		"# TYPE update_operator_oldest_state_entered_timestamp_seconds gauge\n"
	expect := func(want string) {
		t.Helper()
		if want != "" {
			want = header + want
		}
		if err := testutil.CollectAndCompare(f.c.metrics.StateEntered, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	}
	shadows := []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("a", rebooted, staged, since(10*time.Minute)),
		mkShadow("b", rebooted, rebooted, since(time.Minute)),
		mkShadow("c", staged, idle),
		mkShadow("d", idle, idle),
	}
	f.c.updateGauges(shadows)
	expect(`update_operator_oldest_state_entered_timestamp_seconds{state="RebootedIntoUpdate"} 1.772445e+09
update_operator_oldest_state_entered_timestamp_seconds{state="StagedAndPerformedUpdate"} 1.7724456e+09
`)
	// a moves on; b is now the oldest in RebootedIntoUpdate, c went back to Idle.
	shadows = []*updatesv1alpha1.BottlerocketShadow{
		mkShadow("a", monitor, rebooted),
		mkShadow("b", rebooted, rebooted, since(time.Minute)),
		mkShadow("c", idle, idle),
	}
	f.c.updateGauges(shadows)
	expect(`update_operator_oldest_state_entered_timestamp_seconds{state="MonitoringUpdate"} 1.7724456e+09
update_operator_oldest_state_entered_timestamp_seconds{state="RebootedIntoUpdate"} 1.77244554e+09
`)
	f.c.updateGauges(nil)
	expect("")
}
