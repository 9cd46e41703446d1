package model

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// Random stories (fixed seeds) must keep the invariants every state of the
// model satisfies, whatever the inputs.
func TestRandomStoriesKeepTheInvariants(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		cfg := defaultConfig()
		cfg.ClusterThreshold = []float64{0, 0.2, 0.5}[r.Intn(3)]
		cfg.ZoneThreshold = []float64{0, 0.5}[r.Intn(2)]
		cfg.EvictionTimeout = time.Duration(r.Intn(4)-1) * minute
		md := New(cfg)
		now := t0
		exts := []Extension{gating("a"), tracking("u"),
			{Name: "b", AffectsReadiness: true, StartupTimeout: time.Minute, FailOpen: r.Intn(2) == 0}}
		node := func() Node {
			n := fmt.Sprintf("n%d", r.Intn(6))
			w := Node{Name: n, UID: "uid-" + n + []string{"", "x"}[r.Intn(2)], BootID: []string{"", "boot1", "boot2"}[r.Intn(3)],
				Zone: []string{"", "z1", "z2"}[r.Intn(3)], Excluded: r.Intn(10) == 0, TaintedAtCreation: r.Intn(2) == 0}
			for _, e := range exts {
				if r.Intn(3) > 0 {
					w.Extensions = append(w.Extensions, e)
				}
			}
			return w
		}
		lease := func() (string, string) {
			return fmt.Sprintf("n%d", r.Intn(6)), exts[r.Intn(len(exts))].Name
		}
		for i := 0; i < 300; i++ {
			now = now.Add(time.Duration(r.Intn(15)) * sec)
			switch k := r.Intn(20); {
			case k == 0:
				md.Start(now)
			case k == 1 && r.Intn(3) == 0:
				md.Stop(now)
			case k == 2:
				md.NodeAdded(now, node())
			case k == 3:
				md.NodeUpdated(now, node())
			case k == 4 && r.Intn(3) == 0:
				md.NodeDeleted(now, fmt.Sprintf("n%d", r.Intn(6)))
			case k == 5:
				n, e := lease()
				md.LeaseReleased(now, n, e, []string{"Updating", "Crashed"}[r.Intn(2)])
			case k == 6 && r.Intn(3) == 0:
				n, e := lease()
				md.LeaseDeleted(now, n, e)
			case k == 7:
				md.OwnView(now, r.Intn(2) == 0)
			case k < 14:
				n, e := lease()
				md.LeaseRenewed(now, n, e, time.Duration(r.Intn(60))*sec)
			default:
				md.Advance(now)
			}
			checkInvariants(t, seed, i, md, cfg)
		}
	}
}

func checkInvariants(t *testing.T, seed int64, step int, md *Model, cfg Config) {
	t.Helper()
	isHeld := map[string]bool{}
	for _, h := range md.Held() {
		isHeld[h] = true
	}
	for name, v := range md.Nodes() {
		n := md.nodes[name]
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d step %d node %s %+v: "+format, append([]any{seed, step, name, v}, args...)...)
		}
		if isHeld[name] && (v.Tainted || v.ConditionReason != "GatingSuspended" || v.ConditionStatus != "False") {
			fail("held but tainted or not reporting GatingSuspended")
		}
		if v.Evicted && !v.Tainted {
			fail("evicted but not tainted")
		}
		if v.Evicted && cfg.EvictionTimeout < 0 {
			fail("evicted with escalation off")
		}
		if md.running && n.Excluded && v.Tainted {
			fail("excluded but tainted")
		}
		if md.running && !n.Excluded && v.Tainted && n.gate == nil {
			fail("tainted without a gate")
		}
		if md.running && !n.Excluded && !isHeld[name] {
			if v.Tainted && v.ConditionStatus != "False" && v.ConditionReason != "NoRequiredExtensions" {
				fail("tainted but the condition does not say why")
			}
			if !v.Tainted && v.ConditionStatus != "True" {
				fail("neither tainted nor held, yet not ready")
			}
		}
	}
	if !md.running && len(md.Held()) > 0 {
		t.Fatalf("seed %d step %d: held while stopped", seed, step)
	}
	if cfg.ClusterThreshold == 0 && cfg.ZoneThreshold == 0 && !md.ownViewStale && (md.Suspended("") || md.Suspended("z1")) {
		t.Fatalf("seed %d step %d: suspended with every guard off", seed, step)
	}
}
