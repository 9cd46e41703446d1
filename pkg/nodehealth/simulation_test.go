package nodehealth_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	setupcontroller "nodehealth.io/nodehealth/internal/setup/controller"
	"nodehealth.io/nodehealth/pkg/nodehealth"
	"nodehealth.io/nodehealth/pkg/nodehealth/model"
	"nodehealth.io/nodehealth/pkg/nodeutil"
	"nodehealth.io/nodehealth/test/sim"
)

// The simulation runs the real controller — NewController and Run, its
// workers, canary loops and resync on goroutines of their own, its informers
// over a fake API server that behaves as kube-apiserver can (test/sim), its
// real workqueues — beside the reference model of docs/controller.md
// (pkg/nodehealth/model), under a seeded schedule of faults, and requires
// the same observable state from both after every simulated second: each
// node's readiness taint, its SystemExtensionsReady condition and whether
// its pods were evicted. `make test` runs the regression seeds and a few fixed
// ones; `make simulate SEEDS=N` runs N random ones.

// simRegressions are seeds that once found a difference, kept with what they
// found (in the controller, the model or this driver). A change to the
// driver's schedule changes what a seed runs: after one, a kept seed is a
// fixed schedule that runs on every go test, not a replay of its finding.
var simRegressions = sim.Regressions{
	{Seed: 5430220600292196003, Name: "a held node still failing when the blast radius lifts is gated from when it was first held, and a renewal at the lift counts"},
	{Seed: 12169380367777172785, Name: "a conflicting condition write is retried within the second, not a second later"},
	{Seed: 18360018805971215084, Name: "a restarted controller's workers judge what it listed before anything else happens"},
	{Seed: 6163426813997312058, Name: "a label and the first renewal of the extension it brings are never observed in one second"},
	{Seed: 1, Name: "a reboot seen while the own view is stale stays pending until the guard lifts, whatever the catching-up watch delivers first"},
	{Seed: 3, Name: "a reboot during an update is gated as a reboot once the own view is current"},
	{Seed: 11, Name: "a stopped controller observes nothing: the events its informers still had reached the model after a restart during a Lease-watch stall (driver)"},
	{Seed: 28, Name: "a stopped controller observes nothing: its informers' late events made the model taint a node the new controller holds (driver)"},
	{Seed: 8340306768581789401, Name: "an ungate and a new gate (a reboot) in one second end the escalation: the driver sampled only the end of the second (driver)"},
	{Seed: 656584010092113126, Name: "a node re-created while the controller writes it: its retries wait for the informer to deliver the new object instead of spinning (driver)"},
	{Seed: 10708024348038392572, Name: "an extension that came up after the gate began and died before the node was ungated has no startup timeout"},
	{Seed: 16453071871301386689, Name: "a startup timeout passing while the own view is stale restarts at the lift; StartupTimeout ends when the late extension comes up"},
	{Seed: 8571825671609677723, Name: "after a restart the drain invariant waits for the new instance's own eviction clock (driver)"},
	{Seed: 4921215255747016209, Name: "a planned release found at start on a node whose boot record reveals a reboot belongs to the boot before it"},
	{Seed: 22, Name: "a startup timeout passing while the Lease of the previous boot is still valid is reported as one"},
	{Seed: 40, Name: "a release made for a deleted Node does not gate the new Node of that name"},
	{Seed: 84, Name: "after a restart, a condition the node already holds word for word is not written again; a drain retry of an earlier failure evicts nothing in the next one"},
	{Seed: 133, Name: "a gated node that stops failing without being ungated (its gate restarted after an own-view stall, or a planned release) keeps what its eviction clock counted"},
	{Seed: 132, Name: "a planned release after the escalation ends the controller's drain: the updater drains then (driver)"},
	{Seed: 9197560688786608429, Name: "the first Lease of a self-registering extension is a change, not a renewal: a list written in that second is not a steady-state write (driver)"},
	{Seed: 134, Name: "a drain cut by a suspension goes on when it ends (the first of seeds 1–134 to find mutant 3-interrupted-drain-dropped once the drain invariant held only while the node fails)"},
	{Seed: 2464017126761181261, Name: "an extension revived in the very second its Lease expired makes two writes, and the second is not quiet (the driver's)"},
	{Seed: 16355690943911723483, Name: "a re-created node's first renewal in the very second its Lease expired makes two writes, and the second is not quiet (the driver's)"},
	{Seed: 16997267047011645210, Name: "a fail-open that ended while another extension kept the node gated leaves the pending boot record, so a restart does not restore it"},
	{Seed: 17519778984855938557, Name: "the same on a node in service: a fail-open that ended while the node was held for another extension's failure (GatingSuspended) leaves the boot record, so controller 2 does not restore it (make simulate SEEDS=200 on 3a7a540, 2026-11-29)"},
	{Seed: 11458548706464037492, Name: "the same off the node's list: a fail-open whose extension renewed after a label took it off the node ends, and leaves the boot record, so the controllers two reloads started do not restore it when the label comes back (make simulate-fresh on 0278cda, 2026-11-29; fails with reloads off too)"},
	{Seed: 11173182051072828070, Name: "a Lease of the previous boot still valid when a startup timeout fails its extension open does not end the fail-open; only a renewal does"},
	{Seed: 1504675404028735565, Name: "an eviction retry of the old instance firing in the very second the new one starts is the old instance's attempt: the new one drains on its own eviction clock (driver)"},
	{Seed: 17032421548992568283, Name: "a Lease renewed in the very second the controller first saw it with its start grace is a change: the renewal ends the dead mark of the boot record (issue 33's dead marks; make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 14731447017799000584, Name: "the same, after the fourth controller's start (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 2696022713275813172, Name: "an own-view recovery judges readiness as it was when the guard fired: a Lease dead then gets no grace, whatever the catching-up watch delivers in the recovery's second (issue 33, defect 3)"},
	{Seed: 9661583877554528361, Name: "a write refused because the cache had not caught up with the controller's previous write (a dead mark) succeeds on its retry after the next delivery, not a second later (driver; make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 5417920863538170449, Name: "a node re-created while Karpenter's finalizer holds it (being disrupted or deleted) is replaced once the finalizer lets go (driver; make simulate SEEDS=40, 2026-11-28)"},
	{Seed: 6830237159890156263, Name: "an escalated node whose failure pauses while it stays gated (an own-view recovery's grace) and goes on keeps being drained (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 3179572420155271461, Name: "an ungate clears the DrainInProgress the escalation just set although the cache still shows the clear of the node's earlier escalation: the controller's last write counts over a lagging cache (fresh seeds of CI on df4e37a, 2026-11-28)"},
	{Seed: 16365078962249930749, Name: "an ungate refused because the Node changed under it (a label bringing cni) leaves a taint that a held failure removes (was \"a stopped controller observes nothing\" until the lifecycle writes of issue 37 moved its schedule)"},
	{Seed: 3843517428554295788, Name: "a restart while the controller catches up after an outage of its writes starts a new instance from Nodes the model does not know: a taint the outage lost, which the model had started an eviction clock on at the restart (driver; no restart is drawn then; make simulate SEEDS=60 on the sim-faults driver, 2026-11-28)"},
	{Seed: 3166674346706394344, Name: "a gate an outage left pending waits for an own-view guard that outlasts the catching up (a Lease-watch stall begun in the outage): the catching up counts from the guard's lift (driver; make simulate SEEDS=60, 2026-11-28)"},
	{Seed: 7860394480821149444, Name: "the same with the blast radius for guard: gates an outage left pending are held by a suspension the model has up too, and the catching up counts from its lift (driver; make simulate SEEDS=60, 2026-11-28)"},
	{Seed: 8412077615098173412, Name: "an ungate clears a Drained=True whose write lost its answer in an outage: after a failed lifecycle write the cache, not the last write known, says what the node holds (make simulate SEEDS=60, 2026-11-28)"},
	{Seed: 13756747834182287697, Name: "a restarted controller judges the blast radius on all the nodes it lists: counted one by one, 3 failing nodes of zone z0 listed early suspended the zone at 17 % and the hysteresis kept it at 3 of 18 (make simulate SEEDS=100 on the sim-faults driver, 2026-11-28)"},
	{Seed: 15470672626539717290, Name: "the same at controller 2's start (t=2m7s): a zone suspended on a partial count paused the eviction clocks of n2, n4, n6 and n8, which the model evicted 30 s later; it failed only in the orders that suspend, which is why it passed on most replays (make simulate SEEDS=60 on the sim-faults driver, 2026-11-28)"},
	{Seed: 15089412335168732690, Name: "a node held for cni's expiry in a stale view and tainted at the recovery for kube-proxy's release waits only for kube-proxy: cni, ready by the recovery's grace, owes no renewal (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 3960348572464930654, Name: "the same with the API faults: n4 held for cni's expiry in a Lease-watch stall and tainted at the recovery for kube-proxy's release is ungated when kube-proxy comes back (make simulate SEEDS=60 on the sim-faults driver, 2026-11-28)"},
	{Seed: 260058598380515894, Name: "a failure taint decided while the API server refuses the controller's writes is decided again when they are taken, under the own-view guard that fired in that second: held, not tainted, so the gate the recovery taints waits only for what fails then (model; make simulate SEEDS=60, 2026-11-28)"},
	{Seed: 7263671860009865578, Name: "a reboot seen while writes are refused and the own view is stale stays pending until the guard lifts (model: the guard comes before the refused write; make simulate SEEDS=100, 2026-11-28)"},
	{Seed: 10451841283598747068, Name: "a node escalated, then leaving (the autoscaler's taint) and failing again when it stops leaving starts its eviction clock afresh: the drain invariant waits for the new clock, not only for Evicted (driver; make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 7076218198261422834, Name: "an ungate before the informer shows a Drained=True whose write lost its answer clears it: after a failed lifecycle write the next says every condition it decides (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 4052673543596324612, Name: "a reboot's ungate refused by an outage of the writes, then a failure (leaving meanwhile): the node in service records its boot while gated, so controller 2 does not take the old record for a reboot and names ExtensionsNotReady, not NodeRebooted (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 5144553269545614998, Name: "a reboot seen while the own view is stale on a node still tainted by a refused ungate is pending until the lift: the leftover taint is not its own, and renewals the catching-up watch delivers do not end it (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 5546801762588968901, Name: "the leftover taint of an ungate an outage of the controller's writes refused stays owed its removal across the retries of the held failure gate that began on it, and the held node is ungated at the own-view recovery without a renewal (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 13131537040437977849, Name: "a node that stops leaving (its foreign Drained=True grew stale) in the instant another node's Lease expires is counted before that node's failure taint: 3 of 5 failing suspend it (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 15839658414113777250, Name: "a failing node's eviction clock pauses while its gate, restarted at an own-view recovery, waits for renewals, though another node's recount in that instant already counts it as not failing: the controller evicted it 15 s early (make simulate SEEDS=100, 2026-11-28)"},
	{Seed: 2573494415411049320, Name: "the same after two restarts and a 1 s own-view stall (make simulate SEEDS=100, 2026-11-28)"},
	{Seed: 13502343339044881667, Name: "a reboot's ungate refused by an outage of the writes (n3, 2m21s-2m37s), then a failure and the updater's release: controller 2 named NodeRebooted where the model, which had ungated n3, named PlannedMaintenance; each of two fixes, found apart, made it pass alone (the node in service records its boot while gated; the leftover taint stays owed across the held gate's retries) (make simulate SEEDS=200, 2026-11-28)"},
	{Seed: 1221797598538672297, Name: "a failure taint written just before its zone is suspended stays while the Node cache does not show it yet: the controller tainted n5, suspended the zone at n29 and removed n5's taint in that second (make simulate SEEDS=200, 2026-11-29)"},
	{Seed: 10772932245992471847, Name: "a renewal observed in the very second a restarted controller listed the Lease ends the fail-open it restored from the boot record: the list's start grace is the baseline, not a renewal (the sweep for the several-workers mutant, 2026-11-29; fails with one worker too)"},
	{Seed: 255710585287952347, Name: "a released Lease whose reason turned to Updating behind a Lease-watch stall (its renewal and new release unseen) is a planned release of the boot the node is in: the model now hears of the new reason (driver; the 200-seed sweep with the comparison after every event, 2026-11-29)"},
	// The model's (make simulate SEEDS=200, 2026-11-28): n3 was re-created
	// in the second the history was compacted, and a new controller started
	// before the running one wrote anything on the new object; the model
	// kept the old object's boot record and expected NodeRecreated, the
	// controller found the new object as created (tainted at creation:
	// ControllerStarted).
	{Seed: 2542155146350896882, Name: "a Node re-created just before a controller restart is found as it was created: its old object's boot record is gone (model)"},
	// The driver's (CI's fresh seeds, 2026-11-28; failed in about 1 of 7
	// -race runs): the watches closed at 1m54s while the Lease watch was
	// stalled, so it had delivered nothing; less than a second of real time
	// after it opened, the reflector took it for a broken watch and listed
	// again, reading past the stall (the own view recovered at 1m55s, four
	// seconds early). The fake API now ends a closed watch with a bookmark.
	// The driver's (make simulate SEEDS=200, 2026-11-29; failed in about
	// one run of eight): at 1m3s n9 came back from a reboot while the
	// controller, on its older copy of the Node, decided the ungate that
	// the kube-proxy renewal of 1m0s allowed. The patch was refused with a
	// conflict and the write decided again (NodeRebooted), so the taint
	// never left the node; the driver counted the refused patch as a
	// removal and ended the escalated failure the model kept.
	{Seed: 15726260585636682009, Name: "a taint removal the API refused with a conflict removed nothing: only applied writes end a node's escalated failure in the compared view (driver)"},
	{Seed: 5177122390577962639, Name: "a watch closed while stalled is re-watched from its resourceVersion, whatever real time it lasted: the relist that read past the stall depended on the wall clock (driver)"},
	// The controller's, found only by the comparison after every event
	// (make simulate SEEDS=200 on 7e8eccb, 2026-11-29).
	{Seed: 11785018759012118346, Name: "a gate that ends before the Node cache shows its taint has the taint removed from a fresh read: n14, tainted at a blast radius's lift, renewed before the taint's watch event came back and kept the taint beside True/ExtensionsReady"},
}

// simFreshRegressions are seeds a fresh schedule found something with, run
// as a fresh seed runs: unlike simRegressions and the lists of the classes
// drawn before the failovers (keepsItsSchedule), they draw every class by
// its share, workers included, so they replay what they found.
var simFreshRegressions = sim.Regressions{
	// make simulate SEEDS=200 on e4413c9 and make simulate-fresh on
	// 9d2cee7 (2026-11-30; both failed on 25e7bb6 too; open findings until
	// 2026-11-30): the driver's, both in its account of the pods evicted.
	{Seed: 5702612469490362383, Name: "n3, escalated by controller 2, and n7 come due together 30 s after controller 3's start; the controller evicts n7's pods at the free turn, the model n3's: a tie, told to the model by n7's attempt in that instant though n3's pods are evicted still (2m55s, driver)"},
	{Seed: 15315853355086014869, Name: "n2, escalated and held (GatingSuspended), loses a taint another writer added: the controller owning its key ends no failure, and n2's pods stay evicted (1m24s, driver)"},
	// make simulate SEEDS=200 on the dead marks' comparison (2026-11-30; it
	// failed on c68dee0 too): the model's rule of ties, its other half.
	{Seed: 8630686478205880935, Name: "n17 and n19 come due together with the rate spent: the controller gives n19 the earlier turn, which n19, rebooted, spends unescalated, and n17 the next; the model had them the other way round (3m34s, model)"},
	// make simulate SEEDS=200 on 2d6bb89 and a5c9cd0 (2026-11-30; they
	// failed on 25e7bb6 too; open findings until the same day): the model's.
	{Seed: 17062627265987914959, Name: "n4's kube-proxy released for an update, then, the node being removed, released again with ProbeFailed without a renewal: the gate stays planned until the Lease renews (PlannedMaintenance when the autoscaler's taint goes, 1m14s, model)"},
	{Seed: 8673126633062520991, Name: "the same as 17062627265987914959 on n0, after two reboots (2m54s, model)"},
	{Seed: 6464008617877914157, Name: "a reload drops the cni rule: the new instance must not adopt a condition naming cni, which n6 no longer lists (2m11s; the second version of the fix read only the names the node lists)"},
	// make simulate SEEDS=200 with the message's list compared (2026-11-30):
	// the controller's, in the first version of its fix.
	{Seed: 9061028151232962236, Name: "a controller restarted after n14's reboot finds the updater's planned release of the new boot and takes it for the previous boot's: the condition it adopts must name it among the extensions that do not gate (2m27s)"},
	// make simulate SEEDS=200 on 555ed76 and ff41660 (2026-11-30; they
	// failed on 223696d too; open findings until 2026-11-30): the
	// driver's, the model's and the simulated API server's.
	{Seed: 2107260641844157451, Name: "n5, re-created tainted while the own view is stale, loses its taint to another writer in the same second: the controller's retry after the 409 holds the addition, and so does the model, which no longer loses the removal to the old object's deletion (2m44s, driver)"},
	{Seed: 2869923648807023944, Name: "n2's ungate during an outage never writes its boot record, and n2 is excluded before the outage ends: let back in, it is found rebooted (NodeRebooted), not in service with a planned release (4m25s, model)"},
	{Seed: 6795418138671613995, Name: "a lost answer queued before an outage waits for the first write after it: n1's reboot taint is refused with every other write, not applied in the middle of the outage (4m4s, the simulated API server)"},
	// make simulate-fresh on 54c8551 (2026-11-30; it failed on 223696d
	// too): the model's, which had no input for a single conflicted write
	// (Model.WriteRetried, told by the API's OnConflict).
	{Seed: 18385101855240172789, Name: "n0's failure taint, decided before n6's failure suspends zone z0, meets a 409; the retry, after n6's sync, holds it, and so does the model (3m21s)"},
	// make simulate SEEDS=200 on 31e931f (2026-11-30; it failed on 223696d
	// too): the driver's, whose retries ran out within the second sooner
	// than a real controller's back-off (immediateRetry).
	{Seed: 13610272208123868948, Name: "a taint patch applied with its answer lost, two refusals of the retries while the controller's own write was not in its cache, and two conflicts: the condition is written in the same second as the taint (3m24s)"},
	// make simulate SEEDS=200 on 437d3d5 (2026-11-30; it failed on 1f1d6c2
	// too): the driver's, which handed the model one at a time what one
	// sync took together (takenTogether).
	{Seed: 14379374699796990078, Name: "a worker's one sync of n5 takes cni's renewal and kube-proxy's release together (the workqueue coalesced them while the worker waited at a request), so it never sees both ready and keeps the reboot gate; so does the model, which takes them together too (1m8s)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on 0246e43
	// (2026-11-30; it fails with its own draw too, and passes on 1f1d6c2):
	// the controller's, a defect of a4b65c6.
	{Seed: 12444736020531070715, Name: "a condition write answered with a timeout but applied, which the cache then shows, is not written again: rewritten on every sync of an outage of lost answers, it held back n4's escalation, whose turn of the eviction rate came a second late, and n0's after it (4m49s)"},
	// make simulate SEEDS=200 on 1041276 (2026-11-30; it fails on 1f1d6c2
	// too), the model's: the controller cannot tell which of a release and
	// a Node's creation came first in one instant of its clock.
	{Seed: 17933979627001458813, Name: "the updater's release for an update, observed in the very instant its Node is replaced, belongs to the new Node: it waits for the updater's renewal too (n3 at 2m31s, model)"},
	// make simulate SEEDS=200 on 1fecb9a (2026-11-30; it fails on 1f1d6c2
	// too), the model's: a write decided on a view without the world's
	// label change of the same instant is refused (takeBackRefusedWrites).
	{Seed: 583410693624293234, Name: "a failure taint decided in the instant its node moves into a zone that the failure suspends is refused (the Node's labels changed) and held by the new zone's suspension (n3 at 2m6s, model)"},
	// Fresh seeds of fdf937d and ff33a2c (2026-11-30; both fail on 5fc565e
	// too), settled 2026-11-30: the controller's, then the driver's.
	{Seed: 9771644540282225497, Name: "a condition write answered with a timeout but applied is written again when the evaluation comes back to what the controller last knew before the cache shows it: n2 kept False/GatingSuspended over a renewal from the Lease watch's backlog (4m18s)"},
	{Seed: 12545634096559189819, Name: "another writer removes the readiness taint of a node the model has not been told of yet: the model learns of it when the controller's Node watch delivers it, after the node's tainted creation (n8 at 3m8s, driver)"},
	// A fresh seed of beda74b in CI (2026-11-30; it fails on 5fc565e too),
	// the controller's.
	{Seed: 3821303460705370583, Name: "a Lease ready when the own-view guard fired, released and renewed again during the stall, gets the recovery's grace: n3's cni expired at 4m37s on its last renewal, two seconds before it"},
	// A fresh seed of bdad964 (2026-11-30; it fails on f83afc0 too), the
	// controller's: found only by the comparison after every event.
	{Seed: 1487896603008007614, Name: "a taint the controller removed and wants back before its Node cache shows the removal is added from a fresh read: n2, held, lost the taint another writer added and was tainted at the lift a moment later (2m32s)"},
	// make simulate SEEDS=200 on 5e1559c (2026-11-30; it fails on f83afc0
	// too), settled 2026-11-30 (the model's): the world's writes of an
	// instant are at the API server before the controller's writes that
	// follow its deliveries (WorldWrites).
	{Seed: 17376734396083563727, Name: "an ungate decided in the instant of a reboot on a view without it is refused (the Node changed), and its boot record never written: a new instance finds its own gate (ControllerStarted), not a reboot (n6 at 4m23s, model)"},
	// make simulate SEEDS=200 on 5f9043f (2026-11-29): the driver's, then
	// the controller's.
	{Seed: 1853916418618103960, Name: "a held node another writer untainted that recovers and is tainted NodeLeaving in one second has its escalated failure ended: the controller's True condition ends it as a taint removal does (driver)"},
	{Seed: 10902770050846289540, Name: "an escalation whose turn of the eviction rate comes in the instant another node's Lease expires into a blast-radius suspension is held: the eviction worker brings the count up to date at the turn (n1 was evicted at 2m56s as n5's expiry suspended the cluster)"},
	// make simulate SEEDS=200 on 4fca52b (2026-11-29), settled 2026-11-30
	// (the driver's): with 4 workers n12's evaluation took the free turn
	// before n11's; a tie has no order, and the driver tells the model
	// which the controller took (settleTiedTurns).
	{Seed: 8466550013169616459, Name: "n11 and n12 come due in the same instant and the controller's workers give n12 the free turn of the eviction rate: the model takes that order of the tie (driver)"},
	// make simulate-fresh on 8dbbfa7 (2026-11-29), settled 2026-11-30 (the
	// controller's and the model's rule): a renewal observed in the
	// instant a node's hold began came after the hold, so it ends the gate
	// the lift opens, whether the lift came before or after it.
	{Seed: 17597418052033749223, Name: "a controller that starts, suspends and lifts in one instant: a held node's renewal in that instant ends its failure whether the suspension lifted before or after it (n7 at 4m33s)"},
	// make simulate SEEDS=200 on 80e21f0 (2026-11-30), both found on
	// 0d17204 too: the driver's, then the model's.
	{Seed: 5695212880006109346, Name: "another writer removes a node's readiness taint just after a label change that suspends the cluster: the model learns of the removal when the controller's Node watch delivers it, after the label (driver)"},
	{Seed: 11274034325090150136, Name: "a node re-created during an outage of the controller's writes and excluded before it ends has no condition to turn Unknown: none was ever written (model)"},
	// make simulate SEEDS=200 on 3a91196 (2026-11-30): the model's, a
	// defect of e597184 (the controller had it too; its unit test).
	{Seed: 16796596741113341386, Name: "the own view's recovery restarts a gate that began held: the grace it gives a Lease ready when the view went stale is no renewal in the restart's instant (n4 at 2m35s)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on affd4b9
	// (2026-11-30; they fail on 0d17204 too, and with their own draws).
	{Seed: 16025508996173224691, Name: "a node deleted and created again in one second, both delivered before the sync: a new node (NodeRegistered), as when the deletion's sync comes first (n6 at 4m33s)"},
	{Seed: 18207859432137299208, Name: "an ungate whose removal an outage of the writes refused leaves the taint on the node: a failure judged before the writes come back keeps it, and a guard that fires after does not hold it (model; n0 at 5m0s)"},
	{Seed: 12555028893769159383, Name: "a Lease the boot record marks dead is not ready when the own view goes stale: no recovery grace, and a renewal in the stall runs out on its own time (n2 at 4m42s)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on 1595b8d
	// (2026-11-30; it fails with its own draw, with one worker, and on
	// 0d17204).
	{Seed: 14614349608928335306, Name: "the NoExecute variant an escalation wrote stays on a node still gated when a renewal's sync comes before the Node cache shows the write (n6 at 4m9s)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on e5058dd (the
	// driver's; it fails with one worker too).
	{Seed: 17658583345655167450, Name: "a taint patch applied with its answer lost just before the leader stops leaves the condition to the next leader's retry: not compared until it starts (driver)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on 8ffc344
	// (2026-11-30; it fails with one worker and on c68dee0 too): the
	// model's.
	{Seed: 2388285751009756394, Name: "a NoExecute escalation decided during an outage of the writes is not on the node: a reboot before the writes come back drops it with the old gate (model; n17 at 1m26s)"},
	// make simulate SEEDS=200 SIM_FLAGS=-sim.workers=4 on c1f6995
	// (2026-11-30; it fails on c68dee0 too and with its own draw): the
	// model's.
	{Seed: 16230366954742338781, Name: "an escalated node's ungate, decided on a renewal of the instant it came back from a reboot, is refused by the new boot: its pods stay evicted into the reboot's gate (model; n12 at 4m6s)"},
	// make simulate SEEDS=300 on 1df0e6b (2026-12-01; it fails on
	// 91418f9 too): the controller's.
	// make simulate SEEDS=300 on 1df0e6b (2026-12-01; it fails on
	// 91418f9 too): the model's.
	{Seed: 11717233602785484563, Name: "a resume of the blast radius and a new suspension in one instant: a held node the resume tainted in the model may be held again, its sync coming after the suspension (model; n3, n9 at 1m38s)"},
	// make simulate SEEDS=300 on 67ee009 (2026-12-01; they fail on
	// 91418f9 too): the driver's.
	{Seed: 7010551424631186898, Name: "after an outage of the writes, a condition message the retries have not rewritten yet is catching up, and the controller has not caught up before it is (driver; n0 at 2m27s)"},
	{Seed: 14246223282475081723, Name: "the same with four workers (driver; n5 at 3m50s)"},
	// make simulate SEEDS=300 on 547d1e5 (2026-12-01; it fails on
	// 91418f9 too): the controller's.
	{Seed: 8831765713037781631, Name: "the record of a node's new boot, written after an outage that refused its ungate, is not held back by the dead marks' rate limit though it drops the old boot's marks (n6 at 4m0s)"},
	{Seed: 14347737726070202354, Name: "a failure's taint and dead mark applied with the answer lost: the retry finds the boot record it wanted and writes the condition, not decided again on the stale cache (n4 at 22s)"},
	// make simulate SEEDS=200 on b82ce6c (2026-12-01; it fails on a69f416
	// too): the model's.
	{Seed: 7312980953682531094, Name: "n4, re-created and excluded in the same instant: the condition decided on the unlabelled object is refused with the other writes decided before the label, and the excluded node has none to read NodeExcluded (1m31s, model)"},
	// make simulate SEEDS=200 on ca65ea1 (2026-12-01; it fails on d8c1db8
	// too): the driver's.
	{Seed: 15986462990688217337, Name: "the releases one relist brings (a 410 after a Lease-watch stall) are taken together: n3's failure is judged with n7's, which trips their zone, as the controller's sync after the relist judges it (n3 at 14s, driver)"},
	// make simulate SEEDS=200 on 390a6c5 (2026-12-01): the controller's.
	{Seed: 14990059884068702542, Name: "n7's escalation, due at the own view's recovery inside an outage of the writes, takes its NoExecute turn then although the sync's condition write is refused, not at the retry after the outage (n8's turn at 3m53s)"},
	// make simulate SEEDS=200 on bb51fe5 (2026-12-01; it fails on 99016db
	// too): the driver's.
	{Seed: 11483265514425348654, Name: "n7, escalated and then held by the blast radius as an outage of the writes ends, keeps its pods evicted through the hold and the reboot gate after it, though the hold's taint removal reached the Node before its GatingSuspended condition (n7 at 2m51s)"},
	// make simulate SEEDS=300 on e94ee05 (2026-12-02; it passes on
	// 2b8c8a6, whose other writers' race never landed; open finding until
	// 2026-12-02): the model's, which took back every write of the second
	// at a 409 (Model.WriteLanded).
	{Seed: 11236189133390383420, Name: "n1's boot record failing cni open, written and taken in the second, stays when a later patch of that second meets a 409: the retry keeps a pending record without cni, and so does the model (3m4s, model)"},
}

// simSmokeSeeds run on every go test beside the regressions: fixed, so that
// a CI run is deterministic; make simulate explores random ones.
var simSmokeSeeds = []uint64{2, 4, 5}

// simOpenFindings are seeds that fail and are not fixed yet
// (docs/reliability.md, "Open findings"). TestSimulationOpenFindings runs
// them with -sim.open; until they are fixed they would keep CI red.
var simOpenFindings = sim.Regressions{
	// make simulate SEEDS=200 on 861008f (2026-12-02; it fails the same on
	// 6ed133f): diagnosed, not fixed.
	{Seed: 3438677573641066151, Name: "n29's Lease expired in the instant n2, failing, was re-created behind a relist: the controller held n29 on a count that still had the old n2 failing (9 of 32 at 27 %; n2 not synced yet), the model counted the new n2 as a bootstrap (8 of 32) and tainted n29; the hysteresis kept the controller's suspension once its count caught up (4m50s, per-event; diagnosed, not fixed: docs/reliability.md, Open findings)"},
}

var simOpen = flag.Bool("sim.open", false, "run the open findings of the simulation (they fail until fixed)")

func TestSimulationOpenFindings(t *testing.T) {
	if len(simOpenFindings) == 0 {
		t.Skip("no open findings")
	}
	if !*simOpen {
		t.Skipf("%d open findings, not yet fixed (docs/reliability.md, \"Open findings\"); run them with -sim.open", len(simOpenFindings))
	}
	sim.Run(t, "open", simOpenFindings.Seeds(), func(t *testing.T, seed uint64) *sim.Trace {
		return runSimulation(t, seed, simTicks)
	})
}

// The seeds mostly wait: sim.Main runs sim.Parallel of them at once.
func TestMain(m *testing.M) { sim.Main(m) }

func TestSimulation(t *testing.T) {
	logSimStats(t)
	if sim.RaceDetector {
		// Under the race detector (make test-unit's first run) the
		// regression seeds add nothing: what they check is the comparison,
		// which make test-unit's run without it does for every seed. What
		// it looks for is goroutines that touch one value unordered: the
		// informers' handlers, the workers and the driver, whose paths the
		// smoke seeds take, as drawn and with several workers at the gate.
		// The 43 seeds it ran until 2026-12-01 took 274 core-seconds on 2
		// quiet cores, these six runs 37 (docs/development.md, "Tests").
		sim.Run(t, "guards", simSmokeSeeds, func(t *testing.T, seed uint64) *sim.Trace {
			return runSimulation(t, seed, simTicks)
		})
		sim.Run(t, "workers", simSmokeSeeds, func(t *testing.T, seed uint64) *sim.Trace {
			return runSimulationWith(t, seed, simTicks, maxSimWorkers).trace
		})
		return
	}
	var seeds []uint64
	for _, rs := range allRegressions() {
		seeds = append(seeds, rs.Seeds()...)
	}
	seeds = append(seeds, simSmokeSeeds...)
	// The fixed seeds must inject every fault class between them: one that
	// none does any more has a driver that stopped firing it.
	fixed, drawn := sets.New(seeds...), newSimTally()
	sim.Run(t, "guards", seeds, func(t *testing.T, seed uint64) *sim.Trace {
		s := runSimulationWith(t, seed, simTicks, 0)
		if fixed.Has(seed) {
			countSimStats(drawn, s)
		}
		return s.trace
	})
	drawn.CheckDrawn(t, len(seeds), simClassesNoFixedSeedDraws)
}

// simSweepRegressions are seeds a fresh schedule found something with once
// every class of this file was drawn (2026-12-02 on). Unlike the lists
// before them they keep no older schedule: they draw every class by its
// share, as a fresh seed does, so they replay what they found. A class drawn
// after them must leave them out, as the classes before left the others.
var simSweepRegressions = sim.Regressions{
	// make simulate SEEDS=200 on 0fb656a (2026-12-02; it failed on 3170512
	// too), settled 2026-12-02 (the driver's and the model's): the model
	// takes a decision as written when the writes come back, the
	// controller's retry comes after.
	{Seed: 11577162341470377777, Name: "a reboot's taint that the controller's retry after an outage of its writes brought only after the own-view guard fired is pending: the model ended the gate it took as written in the stale view, the controller restarted it at the recovery, and after a second reboot their boot records named different boots (driver; n3 at 1m18s)"},
	// make simulate SEEDS=200 on d599bc9 (2026-12-02; it passed on
	// 3170512, whose schedule differs), settled 2026-12-02 (the
	// controller's and the model's rule): what a held node's gate waits for
	// is judged at the lift, whichever order its instant took.
	{Seed: 15330235846551453348, Name: "a held node whose extension renews in the lift's instant, delivered after the lift (the model) or before the node's sync (the controller): its gate waits for the other failing extension alone, also once an own-view recovery restarts it (n6 at 2m13s)"},
	// make simulate SEEDS=200 on 75ee9cd (2026-12-02; it failed on eae6bc4
	// too), settled 2026-12-02 (the driver's): a node's sync takes the
	// horizon's move with what of its own was delivered before it began.
	{Seed: 17374736721536902828, Name: "a Lease whose expiry came due as a canary renewal moved the view's horizon, renewed in the next delivery of the instant, before the node's sync that the move queued began: that sync took both and never gated the node (driver; n7 at 1m33s)"},
	// make simulate SEEDS=200 on the fix of the one above (2026-12-02; it
	// failed on fd5fb27 too), settled 2026-12-02 (the controller's): the
	// cause a startup timeout gives back is the failures' as they are now.
	{Seed: 5918163945968055005, Name: "a gate whose startup timeout had replaced PlannedMaintenance gave that reason back when the late extension came up, though the updater's Lease had renewed meanwhile and another extension had failed: PlannedMaintenance until the node's next sync (controller; n3 at 2m28s)"},
	// make simulate SEEDS=200 on 940d2db (2026-12-02; it failed on fd5fb27
	// too), settled 2026-12-02 (the controller's and the model's): a gate
	// held off by a stale view with nothing failing ends in that sync.
	{Seed: 17122793937090481195, Name: "a failure gate the own-view recovery restarted, waiting for renewals with nothing failing, whose taint another writer removed while the view was stale again: the controller held it (GatingSuspended) and ended it only at the sync its condition's write brought; the model in its next evaluation (n3 at 2m10s)"},
	// make simulate SEEDS=200 on 45738e8 (2026-12-02; they pass on fd5fb27,
	// before c26a63c), settled 2026-12-02 (the model's, of c26a63c): the
	// blast radius counts every node at the latest horizon.
	{Seed: 3152080200983510809, Name: "kube-proxy died everywhere; a canary renewal moved the horizon past most expiries while two nodes' syncs had not taken it yet: the controller's recount counted them and suspended, the model judged them on their old horizon and tainted (n0–n3, n6 at 2m3s)"},
	{Seed: 11558201572992610440, Name: "the same with 20 nodes: a node the controller held under the suspension its recount found, which the model tainted (n13 at 3m46s)"},
	// make simulate SEEDS=200 on 0818f59 (2026-12-02; they fail on fd5fb27
	// too), settled 2026-12-02 (the driver's): a Lease deleted while no
	// leader runs is missing for the next one and for the model.
	{Seed: 16782450732837084314, Name: "n2's cni Lease deleted a second after the leader stopped: the next leader's list lacked it and tainted n2; no watch told the model (driver; n2 at 4m58s)"},
	{Seed: 2747847405616144912, Name: "n1's and n18's kube-proxy Leases deleted in a 17 s gap between leaders (driver; n1 and n18 at 4m39s)"},
	// make simulate SEEDS=200 on 082a794 (2026-12-02; it failed on fd5fb27
	// too), settled 2026-12-02 (the driver's): a node's sync takes the
	// horizon's move after whatever was delivered before it began.
	{Seed: 775137847053701018, Name: "a canary renewal moved the horizon past n3's and n7's expiries; a node of their zone started leaving before their syncs, which found the zone past its threshold and held them: the model had judged them at the move, on the count before, and tainted them (n3, n7 at 2m24s)"},
	// make simulate SEEDS=300 on 17e35de (2026-12-02; it fails on 6ed133f
	// too): the model's, which held the re-added taint of any failure gate
	// during a suspension, failing or not.
	{Seed: 4348327652707732555, Name: "n2's failure gate, restarted by the own view's recovery and waiting for renewals with nothing failing (cni in the recovery's grace), loses its taint to another writer while the cluster is suspended: not a failure, so the controller puts the taint back, and so does the model (2m46s, model)"},
	// make simulate SEEDS=300 SIM_FLAGS=-sim.workers=4 on 7935390
	// (2026-12-02; it fails with its own draw and on 6ed133f too): the
	// model's, which counted the own view's recovery grace as a renewal.
	{Seed: 12668779848439133758, Name: "n0's kube-proxy failure, held in the stale view, is gated at the lift from when it was first held; cni, added to n0's list then and ready by the recovery's grace, has not renewed since: kube-proxy's renewal alone does not end the gate (2m47s, model)"},
	// make simulate SEEDS=300 on ba21739 (2026-12-02; it fails on 6ed133f
	// too): the model's, which gave a release seen in a reboot's instant to
	// the old boot when it was delivered first; and the controller's, which
	// did so when an evaluation saw the release before the reboot.
	{Seed: 14456852777927726137, Name: "n7's updater released for an update and the node rebooted behind a watch outage: seen in one instant, the release belongs to the new boot and gates it until the updater renews, whichever was seen first (35s, model and controller)"},
	// make simulate SEEDS=200 on 861008f (2026-12-02; both fail on 6ed133f
	// too): the controller's, whose conflict retry replayed a taint decided
	// for a leaving node on a node that no longer left.
	{Seed: 16893502492448166993, Name: "n1's Lease expired in the instant the autoscaler took its karpenter.sh/disrupted taint off: the taint decided for the leaving node met a 409 and the retry wrote it on a node counted again, the third failure, which suspends the cluster: decided again and held (3m54s, controller)"},
	{Seed: 6831522259460231579, Name: "n25's foreign Drained condition turned False in the instant its failure was tainted: the retry after the 409 wrote the taint decided while it was leaving past the suspension its return started; decided again and held (2m57s, per-event, controller)"},
	// make simulate SEEDS=300 SIM_FLAGS=-sim.workers=4 on d52b029
	// (2026-12-02; it fails with its own draw and on c2bc0b5 too): the
	// model's and the driver's, which told the model of a retry that met
	// the guard only for a node it still had tainted.
	{Seed: 17271907123373396587, Name: "n5 came back from a reboot during an outage of the controller's writes; the model took the reboot gate's taint as written when the writes came back and ended the gate on renewals in the stale view of the next second; the controller's retry met the guard, its gate pending: the model puts the node back as it was, pending (58s, after the timers; model and driver)"},
}

// allRegressions are every list of kept seeds, the fresh ones first.
func allRegressions() []sim.Regressions {
	return append(scheduleKeepingRegressions(), simSweepRegressions)
}

// scheduleKeepingRegressions are the lists whose seeds keep the schedule they
// were kept with where a newer draw would change it (keptSeed).
func scheduleKeepingRegressions() []sim.Regressions {
	return []sim.Regressions{simFreshRegressions, simRegressions, simEvictionRegressions, simZoneRegressions, simWritersRegressions,
		simReloadRegressions, simFailoverRegressions, simExcludeRegressions, simUnseenRegressions,
		simLeaseDeleteRegressions, simNodeDeleteRegressions}
}

// The same seed gives the same trace: the schedule, the faults and every
// observable state after each step.
func TestSimulationIsDeterministic(t *testing.T) {
	const seed = 42
	a := runSimulation(t, seed, 120)
	b := runSimulation(t, seed, 120)
	if a.Hash() != b.Hash() {
		t.Fatalf("seed %d gave two traces:\n%s\n----\n%s", seed, a, b)
	}
}

// simTicks is how many simulated seconds one seed runs.
const simTicks = 300

const (
	simLeaseSeconds = 10
	simRenewEvery   = 5 * time.Second
	simCanary       = 2 * time.Second
	// The namespace of the extensions' Leases and the readiness taint's
	// key: the defaults users run.
	simNS       = "node-extension-lease"
	simTaintKey = nodev1alpha1.DefaultReadinessTaintKey
)

func simOptions() nodehealth.Options {
	return nodehealth.Options{
		LeaseNamespace: simNS,
		TaintKey:       simTaintKey,
		TaintEffect:    v1.TaintEffectNoSchedule,
		Rules: []nodehealth.Rule{
			{Name: "kube-proxy", Extension: "kube-proxy", Selector: labels.Everything(), AffectsReadiness: true, FailurePolicy: nodehealth.FailurePolicyKeepGated},
			simCNIRule(),
		},
		RenewalGrace:       5 * time.Second,
		RegistrationGrace:  30 * time.Second,
		MaintenanceReasons: sets.New(nodev1alpha1.ReasonUpdating),
		LeavingNodeTaints:  sets.New(nodev1alpha1.DefaultLeavingNodeTaints()...),
		// Short, so that a foreign lifecycle condition grows stale within
		// a seed.
		LifecycleConditionMaxAge: 90 * time.Second,
		Eviction:                 nodehealth.EvictionOptions{Mode: nodehealth.EvictionModeEvict, Timeout: 30 * time.Second, NodesPerSecond: 1000, Force: true}, // createPods: no controller
		BlastRadius:              nodehealth.BlastRadiusOptions{ClusterThreshold: 0.5, ZoneThreshold: 0.6},
		CanaryInterval:           simCanary,
		MinimumLeaseDuration:     10 * time.Second,
		Identity:                 "sim-controller",
	}
}

func modelConfig(o nodehealth.Options) model.Config {
	return model.Config{
		RenewalGrace:             o.RenewalGrace,
		RegistrationGrace:        o.RegistrationGrace,
		MinimumLeaseDuration:     o.MinimumLeaseDuration,
		EvictionTimeout:          o.Eviction.Timeout,
		EvictionMode:             string(o.Eviction.Mode),
		EscalationsPerSecond:     o.Eviction.NodesPerSecond,
		ClusterThreshold:         o.BlastRadius.ClusterThreshold,
		ZoneThreshold:            o.BlastRadius.ZoneThreshold,
		MaintenanceReasons:       sets.List(o.MaintenanceReasons),
		CanaryInterval:           o.CanaryInterval,
		LeavingNodeTaints:        sets.List(o.LeavingNodeTaints),
		LifecycleConditionMaxAge: o.LifecycleConditionMaxAge,
	}
}

var (
	nodesGVR  = v1.SchemeGroupVersion.WithResource("nodes")
	leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")
)

// simAgent is one extension's heartbeat on one node, as the world has it.
type simAgent struct {
	ext        string
	registered bool // self-registers, affectsReadiness false (the updater)
	alive      bool
	released   string // a release reason while released
	nextRenew  time.Time
}

// leaseName is the name of the agent's Lease on n.
func (a *simAgent) leaseName(n *simNode) string { return nodehealth.LeaseNameFor(a.ext, n.name) }

type simNode struct {
	name, zone string
	// excluded: an admin labelled the node nodehealth.io/exclude=true
	// (excludeFaults).
	excluded bool
	// unlisted: the Node object was created while no leader ran
	// (failover): the model learns of it from the next leader's list.
	unlisted bool
	uid      types.UID
	boot     int
	cni      bool
	agents   []*simAgent
	// A reboot from downFrom until downUntil: heartbeats silent, the new
	// bootID reported at downUntil.
	downFrom, downUntil time.Time
	evicted             bool
	// gen counts re-creations (the UID's suffix).
	gen int
	// The node's guarded pod has a PodDisruptionBudget whose replacement
	// takes a while: the first eviction attempt is refused, and so is every
	// one until budgetAllows (zero: no attempt yet). freeSince is since when
	// no guard has held the node's escalation (zero: held now); lastAttempt
	// the last eviction attempt on the node, made by instance attemptBy.
	budgetAllows, freeSince, lastAttempt time.Time
	attemptBy                            int
	// Leaving (leavingFaults): the leaving taint the node carries ("":
	// none), until when, or when the node is deleted (zero: not), and
	// whether its deletion waits for a finalizer until finalizeAt.
	leavingTaint         string
	leaveUntil, removeAt time.Time
	finalizeAt           time.Time
	// drainedBy: a foreign Drained=True lifecycle condition is on the
	// node (leavingFaults), written at drainedSince.
	drainedSince time.Time
	// skew: how far the node's clock is off (skewFaults).
	skew time.Duration
}

func (n *simNode) bootID() string { return fmt.Sprintf("boot-%d", n.boot) }

// simulation is one seed's run.
type simulation struct {
	t   *testing.T
	ctx context.Context
	rng *sim.Rand
	api *sim.API
	clk *sim.Clock
	// removals are the nodes whose readiness taint an applied write took
	// off since the last comparison (taintRemovals).
	removalsMu sync.Mutex
	removals   sets.Set[string]
	// noExecuteAdded is when the NoExecute variant of the readiness taint
	// was last put on each node (an escalation in mode NoExecute).
	noExecuteAdded map[string]time.Time
	// queues are the controller's work queues, the node queue first: the
	// driver builds them for it (Config.Queues) and releases their delayed
	// items.
	queues []*driverDelays
	kube   *fake.Clientset
	opts   nodehealth.Options
	model  *model.Model
	trace  *sim.Trace
	nodes  []*simNode

	// The running controller instance, its informers, and how many
	// notifications the model's handlers received from them.
	c       *setupcontroller.Controller
	metrics *nodehealth.Metrics
	// The instance's caches, through its informers' indexers.
	nodeLister  corelisters.NodeLister
	leaseLister coordinationlisters.LeaseLister
	informers   []sim.Informer
	fed         *atomic.Int64
	// feeding is whether the current instance's informers still feed the
	// model: a stopped instance observes nothing, though its informers may
	// still hand over events their watches had before they stopped.
	feeding *atomic.Bool
	// The previous second: whether only renewals happened in it, and the
	// observable state after it (checkSteadyWrites).
	prevQuiet bool
	prevState string
	cancel    context.CancelFunc
	gen       int

	// known: the nodes the model has been told about.
	known sets.Set[string]
	// unseenRemovals holds, per node, the resourceVersion of another
	// writer's removal of the readiness taint that the controller's Node
	// watch has not delivered yet: the model is told of it
	// (ReadinessTaintRemoved) in the order the controller sees it.
	unseenRemovals *removals
	// unseenLeaseDeletions are the Leases ("node/extension") deleted
	// (leaseDeletions) whose deletion the running instance's Lease watch
	// has not delivered, nor any later event of theirs (under observedMu):
	// a leader that stops before it does leaves the next one a list
	// without them, and no deletion to tell the model.
	unseenLeaseDeletions sets.Set[string]
	// owedAtStop are the nodes whose last sync failed when the leader
	// stopped: the retry that would have finished their writes (a taint
	// applied with its answer lost, the condition after it) is the next
	// leader's to make, so they are not compared until it has started.
	owedAtStop sets.Set[string]
	// observed holds what the informers observed since the last flush, for
	// the model: handlers run on goroutines of their own, so their inputs
	// are queued and handed to the model in one canonical order.
	observedMu sync.Mutex
	observed   []modelInput
	// syncs are the syncs of nodes begun since the last flush, each with the
	// delivery it began after: what tells flush which observations one sync
	// took together.
	syncs []syncStart
	// together counts the groups of observations the model took together.
	together int
	// deliveries counts the events the driver delivered one at a time
	// (deliver, deliverBetween): it stamps what the handlers observe.
	deliveries atomic.Int64
	// stallUntil: the Lease watch is stalled until then (zero: not).
	stallUntil time.Time
	// revive: agents to bring back at an instant.
	revive map[time.Time][]*simAgent
	// renewedAt is when the driver last renewed each Lease (by name, so a
	// re-created node's agents find their predecessors' renewals).
	renewedAt map[string]time.Time
	// lrng draws the leaving nodes (leavingFaults) from a stream of its
	// own, so that the seeds kept before they were added run the same
	// schedule until the first node leaves. named counts the nodes ever
	// created: a name is never given twice, though nodes are deleted.
	lrng  *sim.Rand
	named int
	// frng draws the API-server faults (apiFaults) from a stream of their
	// own; outageUntil ends an outage of the controller's writes (zero:
	// none), and until lagUntil the controller may lag behind the model.
	frng                  *sim.Rand
	outageUntil, lagUntil time.Time
	// retriesUntil: until then a write may be the retry of one the outage
	// refused, though the compared view caught up (compare).
	retriesUntil time.Time
	lastRelist   time.Time // the last 410 apiFaults caused
	// evictErred: the pods whose eviction got an error (evictionError);
	// podsGone: those answered 404, to delete.
	evictErred sets.Set[string]
	podsGone   []*v1.Pod
	// wrongEvictions: the eviction attempts on pods a drain must leave
	// (wrongEviction), reported by the next compare.
	wrongEvictions []string
	// zonelessEvery: every zonelessEvery-th node carries no zone label
	// (drawConfig; zero: all do).
	zonelessEvery int
	// viewStale: the controller's own view is stale (checkView).
	viewStale bool
	// smallCluster, when drawn, is how many nodes the cluster starts with
	// (3-5; drawConfig); startNodes is how many it started with.
	smallCluster, startNodes int
	// zones is how many zones the nodes are created in, in turn (2; 3-4
	// as drawConfig draws).
	zones int
	// What -sim.stats counts beside the trace: eviction errors injected,
	// and whether drawConfig drew the blast radius's thresholds.
	evictionErrors  int
	thresholdsDrawn bool
	// krng draws the nodes' clock skews (skewFaults) from a stream of its
	// own.
	krng *sim.Rand
	// zrng draws the changes of zone labels (zoneFaults) from a stream of
	// its own; nil in the seeds that draw none (drawZoneChanges).
	zrng *sim.Rand
	// rrng draws the configuration reloads (reloadFaults) from a stream of
	// its own; nil in the seeds that draw none (drawReloads).
	rrng *sim.Rand
	// grng draws the gaps failovers leave without a leader (failoverGap)
	// from a stream of its own; nil in the seeds that draw none. While
	// nextLeader is set no instance runs, and the next starts then.
	grng       *sim.Rand
	nextLeader time.Time
	// startedAt is when the running instance started.
	startedAt time.Time
	// loops is the simulated clock as the running instance sees it: it
	// knows when the instance's timed loops (the canary's two, the
	// resync) wait again (startController, awaitLoops).
	loops *loopClock
	// ran is closed when the running instance's Run has returned.
	ran chan struct{}
	// crng draws the canary's failing renewals (canaryFaults) from a
	// stream of its own; nil when the seed draws none.
	crng *sim.Rand
	// xrng draws the nodes an admin excludes (excludeFaults) from a stream
	// of its own; nil in the seeds that draw none.
	xrng *sim.Rand
	// urng draws the Nodes re-created behind a stalled watch
	// (unseenRecreations); nil in the seeds that draw none.
	urng *sim.Rand
	// drng draws the extension Leases someone deletes (leaseDeletions);
	// nil in the seeds that draw none.
	drng *sim.Rand
	// nrng draws the Nodes deleted outright (nodeDeletions); nil in the
	// seeds that draw none.
	nrng *sim.Rand
	// writers: the other writers of the nodes (writerFaults); nil in the
	// seeds that draw none (drawWriters).
	writers *otherWriters
	// The controller's node workers (drawWorkers): with more than one,
	// each runs on a goroutine of its own and its requests, through ctrl,
	// wait at gate until wrng picks them (drainWorkers). interleaving
	// records each pick among several held requests (overlaps) and each
	// event delivered between requests (deliveredBetween).
	workers                    int
	wrng                       *sim.Rand
	ctrl                       *fake.Clientset
	gate                       *sim.Gate
	interleaving               *sim.Trace
	overlaps, deliveredBetween int
	// perEvent: compare after every delivered event too (-sim.per-event);
	// eventDiff: compareEvent found a difference in this second;
	// eventChecks counts the points it compared at.
	perEvent    bool
	eventDiff   bool
	eventChecks int
	// foreignRV: for each node, a resourceVersion at or below that of the
	// last write someone other than the controller requested on it
	// (noteForeignWrites); compareEvent leaves the node alone until the
	// controller's cache has caught up with it.
	foreignMu sync.Mutex
	foreignRV map[string]int64
	// ctrlNodePatches counts the controller's Node patches the API served
	// (checkRacesReachTheController); of them, those answered with a
	// conflict and with a timeout (-sim.stats: the injected faults that
	// reached the controller, not only armed).
	ctrlNodePatches, ctrlPatchesConflicted, ctrlPatchesTimedOut atomic.Int64
}

func runSimulation(t *testing.T, seed uint64, ticks int) *sim.Trace {
	t.Helper()
	return runSimulationWith(t, seed, ticks, 0).trace
}

// runSimulationWith runs a seed with workers node workers (0: as the seed
// draws them, or -sim.workers).
func runSimulationWith(t *testing.T, seed uint64, ticks, workers int) *simulation {
	t.Helper()
	s := newSimulation(t, seed, workers)
	defer s.stop()
	defer func() {
		if t.Failed() && s.interleaving.Len() > 0 {
			t.Logf("the last steps of the %d workers:\n%s", s.workers, s.interleaving.Tail(40))
		}
	}()
	for range ticks {
		if !s.step() {
			break
		}
	}
	s.checkRacesReachTheController()
	if *simStats {
		countSimStats(simStatsCount, s)
	}
	return s
}

func newSimulation(t *testing.T, seed uint64, workers int) *simulation {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rng := sim.NewRand(seed)
	s := &simulation{t: t, ctx: ctx, rng: rng, clk: sim.NewClock(time.Second), opts: simOptions(), perEvent: *simPerEvent,
		trace: &sim.Trace{}, revive: map[time.Time][]*simAgent{}, renewedAt: map[string]time.Time{}, known: sets.New[string](), unseenRemovals: &removals{rv: map[string]removal{}},
		unseenLeaseDeletions: sets.New[string](),
		lrng:                 sim.NewRand(seed ^ 0x6c656176696e67), frng: sim.NewRand(seed ^ apiFaultsStream), krng: sim.NewRand(seed ^ skewStream),
		evictErred: sets.New[string]()}
	s.api = sim.NewAPI(scheme.Scheme, rng.Fork())
	// One quiet poll, as the updater's simulation settles: handlersDone
	// counts every notification the controller's and the model's handlers
	// ran against Seen. Until Seen counted a notification before Settle
	// took its delivery as seen, and Settle counted an informer's listed
	// items, one poll was not deterministic (seed 10551252436763913580,
	// eight copies at once: 27 of 56 runs differed after a 410's relist;
	// 0 of 56 since, and 24 fresh seeds hash as with three polls).
	s.api.SettlePolls = 1
	s.removals, s.noExecuteAdded = sets.New[string](), map[string]time.Time{}
	s.api.OnStore = s.recordTaintRemoval
	s.api.Clock = s.clk
	s.api.EvictionHook = func(pod *v1.Pod) error {
		if why := pod.Labels[staysLabel]; why != "" {
			return s.wrongEviction(pod, why)
		}
		for _, n := range s.nodes {
			if n.name != pod.Spec.NodeName {
				continue
			}
			now := s.clk.Now()
			// Only the running instance evicts: the old one is stopped
			// before the next starts (startController).
			n.evicted, n.lastAttempt, n.attemptBy = true, now, s.gen
			if err := s.evictionError(pod); err != nil {
				return err
			}
			if pod.Labels["budget"] != "guarded" {
				return nil
			}
			if n.budgetAllows.IsZero() {
				// Derived from the pod, not drawn: when the controller
				// evicts is its own business, and must not shift the
				// seed's other draws.
				n.budgetAllows = now.Add(time.Duration(5+hash(pod.Name, now)%16) * time.Second)
			}
			if now.Before(n.budgetAllows) {
				return fmt.Errorf("the budget of %s allows no disruption until %s", pod.Name, n.budgetAllows.Sub(sim.Epoch))
			}
			n.budgetAllows = time.Time{}
		}
		return nil
	}
	s.kube = fake.NewClientset()
	s.api.Install(&s.kube.Fake)
	s.noteForeignWrites(&s.kube.Fake)
	// The controller's own client: what its workers request waits at the
	// gate while they run on goroutines of their own (drainWorkers).
	s.ctrl, s.gate, s.interleaving = fake.NewClientset(), sim.NewGate(), &sim.Trace{}
	s.api.InstallGated(&s.ctrl.Fake, s.gate)
	// A 409 on the controller's patch of a Node's taints and annotations
	// makes it compute the write again on the fresh read that follows,
	// after what it observed until then: the model is told when that read
	// is answered, in the order of the deliveries (the key sorts after the
	// delivery's own observations). It is told too of each patch taken:
	// a later 409 in the same second refuses only what came after it.
	retrying := sets.New[string]()
	s.api.OnServed(&s.ctrl.Fake, func(action clienttesting.Action, err error) {
		if action.GetResource() != nodesGVR || action.GetSubresource() != "" {
			return
		}
		switch a := action.(type) {
		case clienttesting.PatchAction:
			s.ctrlNodePatches.Add(1)
			switch name := a.GetName(); {
			case err == nil:
				at := s.clk.Now()
				s.observe("9/"+name, func() { s.model.WriteLanded(s.late(at), name) })
			case apierrors.IsConflict(err):
				s.ctrlPatchesConflicted.Add(1)
				retrying.Insert(name)
			case apierrors.IsTimeout(err):
				s.ctrlPatchesTimedOut.Add(1)
			}
		case clienttesting.GetAction:
			if name := a.GetName(); retrying.Has(name) {
				retrying.Delete(name)
				at := s.clk.Now()
				s.observe("9/"+name, func() { s.model.WriteRetried(s.late(at), name) })
			}
		}
	})
	extra := s.drawConfig(seed)
	s.drawEviction(seed)
	s.drawZoneChanges(seed)
	s.drawWriters(seed)
	s.drawWorkers(seed, workers)
	s.drawReloads(seed)
	s.drawFailovers(seed)
	s.drawExclusions(seed)
	s.drawUnseenRecreations(seed)
	s.drawLeaseDeletions(seed)
	s.drawNodeDeletions(seed)
	s.drawCanaryFaults(seed)
	s.model = model.New(modelConfig(s.opts))

	// Half the seeds give cni a startup timeout, failing closed or open.
	if rng.Chance(0.5) {
		cni := &s.opts.Rules[1]
		cni.StartupTimeout = time.Duration(10+rng.Intn(30)) * time.Second
		cni.FailurePolicy = nodehealth.FailurePolicyKeepGated
		if rng.Chance(0.5) {
			cni.FailurePolicy = nodehealth.FailurePolicyUngate
		}
	}

	// The cluster: 6 to 9 nodes in two zones (3 to 60 as drawConfig
	// draws), all running kube-proxy, some cni, some the updater
	// (self-registered, not gating).
	count := 6 + rng.Intn(4) + extra
	if s.smallCluster > 0 {
		count = s.smallCluster
	}
	s.startNodes = count
	for range count {
		n := s.newNode()
		s.create(s.nodeObject(n))
		s.createPods(n, "")
		for _, a := range n.agents {
			if a.ext != "cni" || n.cni {
				s.create(s.leaseObject(n, a))
				a.nextRenew = sim.Epoch.Add(time.Duration(rng.Intn(3)) * time.Second)
			}
		}
	}
	s.startController()
	return s
}

// newNode adds the next node to the world (not yet to the API).
func (s *simulation) newNode() *simNode {
	i := s.named
	s.named++
	n := &simNode{name: fmt.Sprintf("n%d", i), zone: fmt.Sprintf("z%d", i%s.zones), uid: types.UID(fmt.Sprintf("uid-n%d", i)),
		boot: 1, cni: s.rng.Chance(0.5)}
	if s.zonelessEvery > 0 && i%s.zonelessEvery == s.zonelessEvery-1 {
		n.zone = ""
	}
	n.agents = []*simAgent{{ext: "kube-proxy", alive: true}, {ext: "cni", alive: true}}
	if s.rng.Chance(0.5) {
		n.agents = append(n.agents, &simAgent{ext: "bottlerocket-updater", registered: true, alive: true})
	}
	s.nodes = append(s.nodes, n)
	return n
}

// join adds a node while the cluster runs (a scale-up), created with the
// readiness taint already on when taint is set (the creation-time admission
// policy); its DaemonSet pods start a few seconds later and create their
// Leases with their first renewal.
func (s *simulation) join(now time.Time, taint bool) {
	n := s.newNode()
	obj := s.nodeObject(n)
	if taint {
		obj.Spec.Taints = []v1.Taint{{Key: simTaintKey, Effect: v1.TaintEffectNoSchedule}}
	}
	s.create(obj)
	n.unlisted = s.leaderless()
	s.createPods(n, "")
	for _, a := range n.agents {
		a.nextRenew = now.Add(time.Duration(2+s.rng.Intn(20)) * time.Second)
	}
	s.trace.Add("t=%s %s joins (zone %s, cni %v, tainted at creation %v)", s.at(), n.name, n.zone, n.cni, taint)
}

// recreate replaces a node's Node object by a new one of the same name (a
// machine replaced under the same name): its pods go with the old object,
// its DaemonSet pods start again on the new machine.
func (s *simulation) recreate(n *simNode, now time.Time, taint bool) {
	finalizing := !n.finalizeAt.IsZero()
	if finalizing || n.leavingTaint == nodev1alpha1.TaintKarpenterDisrupted {
		// Karpenter's finalizer would hold the old object (seed
		// 5417920863538170449): it lets go first, then the replacement
		// comes.
		s.mutateNode(n, false, func(node *v1.Node) {
			node.Finalizers = slices.DeleteFunc(node.Finalizers, func(f string) bool { return f == karpenterFinalizer })
		})
	}
	if err := s.kube.CoreV1().Nodes().Delete(s.ctx, n.name, metav1.DeleteOptions{}); err != nil && !(finalizing && apierrors.IsNotFound(err)) {
		s.t.Fatalf("deleting node %s: %v", n.name, err)
	}
	s.deletePods(n)
	n.gen++
	n.uid = types.UID(fmt.Sprintf("uid-%s-%d", n.name, n.gen))
	n.boot++
	n.evicted, n.budgetAllows, n.lastAttempt, n.attemptBy, n.downFrom, n.downUntil = false, time.Time{}, time.Time{}, 0, time.Time{}, time.Time{}
	// The new machine carries none of the old one's leaving signals, nor
	// an admin's exclusion.
	s.stopLeaving(n, now, false)
	n.excluded = false
	n.removeAt, n.finalizeAt, n.drainedSince = time.Time{}, time.Time{}, time.Time{}
	obj := s.nodeObject(n)
	if taint {
		obj.Spec.Taints = []v1.Taint{{Key: simTaintKey, Effect: v1.TaintEffectNoSchedule}}
	}
	s.create(obj)
	n.unlisted = s.leaderless()
	s.createPods(n, fmt.Sprintf("-%d", s.clk.Elapsed()/time.Second))
	for _, a := range n.agents {
		if a.alive && a.released == "" {
			a.nextRenew = now.Add(time.Duration(2+s.rng.Intn(20)) * time.Second)
		}
	}
	s.trace.Add("t=%s %s re-created (uid %s, tainted at creation %v)", s.at(), n.name, n.uid, taint)
}

// createPods puts the node's workload on it: a pod anyone may evict and a
// guarded one, whose budget refuses evictions for a while (EvictionHook), so
// that a drain is in progress long enough for a guard to cut it. Both declare
// a controller (a ReplicaSet the simulation does not run), so that an
// escalation in a mode other than Evict, which takes no eviction.force,
// would evict them as mode Evict does.
func (s *simulation) createPods(n *simNode, suffix string) {
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "workload", UID: "uid-workload", Controller: ptr.To(true)}}
	s.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p-" + n.name + suffix, OwnerReferences: owner}, Spec: v1.PodSpec{NodeName: n.name}})
	s.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g-" + n.name + suffix, Labels: map[string]string{"budget": "guarded"}, OwnerReferences: owner},
		Spec: v1.PodSpec{NodeName: n.name}})
	for _, p := range stayingPods(n.name, suffix) {
		s.create(p)
	}
}

// hash derives a number from a name and an instant.
func hash(name string, at time.Time) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s@%d", name, at.UnixNano())
	return h.Sum64()
}

// taintRemovals are the nodes whose readiness taint the controller removed
// in this second, whatever it did next: the state sampled at the end of the
// second can hide an ungate followed by a new gate. Only writes the API
// applied count (recordTaintRemoval). refused are the nodes whose removal
// the controller sent and the API refused, with no removal applied: the
// controller decided that their failure was over, and a conflict (the Node
// changed under the decision) or a fault kept the taint on.
func (s *simulation) taintRemovals() (applied, refused sets.Set[string]) {
	s.removalsMu.Lock()
	applied, s.removals = s.removals, sets.New[string]()
	s.removalsMu.Unlock()
	refused = sets.New[string]()
	for _, a := range s.ctrl.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetResource().Resource != "nodes" || p.GetSubresource() != "" || applied.Has(p.GetName()) {
			continue
		}
		// A list emptied is sent as "taints": null (nodeutil.MergePatch),
		// which removes the taint as surely as a list without it.
		var patch struct {
			Spec *struct {
				Taints json.RawMessage `json:"taints"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &patch); err != nil || patch.Spec == nil || patch.Spec.Taints == nil {
			continue
		}
		var taints []v1.Taint
		if err := json.Unmarshal(patch.Spec.Taints, &taints); err != nil {
			continue
		}
		if !slices.ContainsFunc(taints, func(t v1.Taint) bool { return t.Key == simTaintKey }) {
			refused.Insert(p.GetName())
		}
	}
	return applied, refused
}

// recordTaintRemoval is the API's OnStore: it notes when a Node write put
// the NoExecute variant on (noExecuteAdded), and a Node write that took
// the readiness taint off, or that ended a failure the node was held for
// untainted: the controller's True condition on a node whose condition was
// not True (seed 1853916418618103960: a held node another writer had
// untainted recovered and, leaving, was tainted NodeLeaving in the same
// second; the failure its pods were evicted for had ended between). Only
// the controller writes those reasons; other writers write their own.
func (s *simulation) recordTaintRemoval(gvr schema.GroupVersionResource, obj, prev runtime.Object) {
	if gvr.Resource != "nodes" || prev == nil {
		return
	}
	was, is := prev.(*v1.Node), obj.(*v1.Node)
	if !nodeutil.HasTaint(was, simTaintKey, v1.TaintEffectNoExecute) && nodeutil.HasTaint(is, simTaintKey, v1.TaintEffectNoExecute) {
		s.removalsMu.Lock()
		s.noExecuteAdded[is.Name] = s.clk.Now()
		s.removalsMu.Unlock()
	}
	removed := nodeutil.HasTaint(was, simTaintKey, v1.TaintEffectNoSchedule) && !nodeutil.HasTaint(is, simTaintKey, v1.TaintEffectNoSchedule) &&
		!heldByController(was)
	if removed || !nodeutil.HasTaint(is, simTaintKey, v1.TaintEffectNoSchedule) && controllerRecovered(was, is) {
		s.removalsMu.Lock()
		s.removals.Insert(is.Name)
		s.removalsMu.Unlock()
	}
}

// heldByController: the controller holds the node's failure untainted
// (GatingSuspended), so a readiness taint on it is another writer's, and
// taking it off is the controller owning its key, not an ungate: the
// failure goes on (seed 15315853355086014869: n2, escalated and held,
// lost a taint another writer added at 1m24s; its pods stay evicted). A
// held failure ends with the controller's True condition
// (controllerRecovered).
func heldByController(node *v1.Node) bool {
	c := nodeutil.Condition(node, nodev1alpha1.SystemExtensionsReadyCondition)
	return c != nil && c.Status == v1.ConditionFalse && c.Reason == nodev1alpha1.ReasonGatingSuspended
}

// controllerRecovered: the write turned the node's SystemExtensionsReady
// condition True with a reason of the controller's, from a condition that
// was not True.
func controllerRecovered(was, is *v1.Node) bool {
	before, after := nodeutil.Condition(was, nodev1alpha1.SystemExtensionsReadyCondition), nodeutil.Condition(is, nodev1alpha1.SystemExtensionsReadyCondition)
	if after == nil || after.Status != v1.ConditionTrue || before != nil && before.Status == v1.ConditionTrue {
		return false
	}
	switch after.Reason {
	case nodev1alpha1.ReasonExtensionsReady, nodev1alpha1.ReasonExtensionsFailedOpen, nodev1alpha1.ReasonNoRequiredExtensions:
		return true
	}
	return false
}

// checkSteadyWrites is the invariant of steady state: in a second where
// nothing but renewals happened, after another such second, with every node
// ready and nothing observable changed (state includes the conditions'
// messages, which name extensions that do not affect readiness), the
// controller writes no Node
// (steady-state cost follows the rate of change, not of renewals).
func (s *simulation) checkSteadyWrites(quiet bool, state string) []string {
	steady := quiet && s.prevQuiet && state == s.prevState && !strings.Contains(state, "=tainted/") && !strings.Contains(state, "/False")
	s.prevQuiet, s.prevState = quiet, state
	if !steady {
		return nil
	}
	var writes []string
	for _, a := range s.ctrl.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			p := a.(clienttesting.PatchAction)
			writes = append(writes, p.GetName()+" "+string(p.GetPatch()))
		}
	}
	if len(writes) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the controller wrote Nodes at steady state (invariant): %s", strings.Join(writes, "; "))}
}

// drainGap is the longest a drain may leave an escalated node's pods
// without an eviction attempt while nothing stops it: a budget refuses for
// at most 20 s, so the per-pod back-off (5, 10, 20 s, ...) never waits more
// than 20 s before the attempt that succeeds.
const drainGap = 25 * time.Second

// checkDrain is the invariant of an escalated node: while it is still
// failing (a planned release or a reboot ends the controller's drain: the
// updater drains then, or the node's pods restarted), no guard holds its
// escalation and pods are left on it, the drain goes on, also after a
// suspension cut it in the middle: an eviction attempt at least every
// drainGap, once the current controller instance began the drain.
func (s *simulation) checkDrain(n *simNode, w model.NodeView) []string {
	now := s.clk.Now()
	// Escalated, not only Evicted: a node that stops leaving while still
	// failing starts its eviction clock afresh, and its drain waits for
	// it (seed 10451841283598747068), and then for its turn of the
	// eviction rate, which the model counts.
	if !w.Evicted || !s.model.Escalated(n.name) || !s.model.Failing(n.name) || s.model.Suspended(n.zone) || s.leaderless() {
		// While no leader runs nothing evicts: the next leader's own
		// eviction clock says when its drain begins (seed
		// 14225556804541496191: a 13–17 s gap is longer than drainGap).
		n.freeSince = time.Time{}
		return nil
	}
	if n.freeSince.IsZero() {
		n.freeSince = now
	}
	if n.attemptBy != s.gen {
		// The current instance has not begun this node's drain: after a
		// restart its own eviction clock, paused by any suspension, says
		// when it does. Which instance made the last attempt, not when:
		// the old instance's retry may fire in the very second the new
		// one starts (seed 1504675404028735565).
		return nil
	}
	since := n.freeSince
	if n.lastAttempt.After(since) {
		since = n.lastAttempt
	}
	if now.Sub(since) <= drainGap {
		return nil
	}
	var left []string
	for _, p := range s.pods(n) {
		if p.Labels[staysLabel] == "" {
			left = append(left, p.Name)
		}
	}
	if len(left) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: escalated and held by no guard since %s, no eviction attempt since %s, yet pods %s are left on it (invariant)",
		n.name, n.freeSince.Sub(sim.Epoch), since.Sub(sim.Epoch), strings.Join(left, ", "))}
}

// pods are the pods bound to the node, in name order.
func (s *simulation) pods(n *simNode) []*v1.Pod {
	var out []*v1.Pod
	for _, obj := range s.api.Objects(v1.SchemeGroupVersion.WithResource("pods")) {
		if p := obj.(*v1.Pod); p.Spec.NodeName == n.name {
			out = append(out, p)
		}
	}
	return out
}

// deletePods removes what is left of the node's workload before it comes
// back: a guarded pod the drain did not get to goes with its replacement.
func (s *simulation) deletePods(n *simNode) {
	for _, p := range s.pods(n) {
		if err := s.kube.CoreV1().Pods(p.Namespace).Delete(s.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			s.t.Fatalf("deleting pod %s: %v", p.Name, err)
		}
	}
}

func (s *simulation) create(obj interface{ GetName() string }) {
	s.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Node:
		_, err = s.kube.CoreV1().Nodes().Create(s.ctx, o, metav1.CreateOptions{})
	case *v1.Pod:
		_, err = s.kube.CoreV1().Pods(o.Namespace).Create(s.ctx, o, metav1.CreateOptions{})
	case *coordinationv1.Lease:
		_, err = s.kube.CoordinationV1().Leases(o.Namespace).Create(s.ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		s.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (s *simulation) nodeObject(n *simNode) *v1.Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, UID: n.uid, Labels: map[string]string{v1.LabelTopologyZone: n.zone}},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{BootID: n.bootID()}}}
	if n.zone == "" {
		delete(node.Labels, v1.LabelTopologyZone)
	}
	if n.cni {
		node.Labels["cni"] = "true"
	}
	return node
}

func (s *simulation) leaseObject(n *simNode, a *simAgent) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: simNS, Name: a.leaseName(n), Labels: nodev1alpha1.LeaseLabels(a.ext, n.name)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a.ext + "-" + n.name), LeaseDurationSeconds: ptr.To[int32](simLeaseSeconds),
			RenewTime: &metav1.MicroTime{Time: s.clk.Now()}},
	}
	if a.registered {
		l.Labels[nodev1alpha1.RegisterLabel] = "true"
		l.Labels[nodev1alpha1.AffectsReadinessLabel] = "false"
	}
	return l
}

// modelNode is the node as the model takes it: the extension list the
// controller resolves from its rules and the registrations.
func (s *simulation) modelNode(node *v1.Node) model.Node {
	mn := model.Node{Name: node.Name, UID: string(node.UID), BootID: node.Status.NodeInfo.BootID, Zone: node.Labels[v1.LabelTopologyZone],
		Labels: node.Labels}
	mn.TaintedAtCreation = nodeutil.HasTaint(node, simTaintKey, v1.TaintEffectNoSchedule)
	mn.Excluded = node.Labels[nodev1alpha1.ExcludeLabel] == "true"
	mn.Taints, mn.Deleting, mn.Unschedulable, mn.LifecycleConditions = leavingInputs(node)
	mn.Extensions = append(mn.Extensions, model.Extension{Name: "kube-proxy", AffectsReadiness: true})
	if cni := simRuleNamed(&s.opts, "cni"); cni != nil && node.Labels["cni"] == "true" {
		mn.Extensions = append(mn.Extensions, model.Extension{Name: "cni", AffectsReadiness: true,
			StartupTimeout: cni.StartupTimeout, FailOpen: cni.FailurePolicy == nodehealth.FailurePolicyUngate})
	}
	for _, n := range s.nodes {
		if n.name != node.Name {
			continue
		}
		for _, a := range n.agents {
			if a.registered {
				mn.Extensions = append(mn.Extensions, model.Extension{Name: a.ext})
			}
		}
	}
	return mn
}

// startController starts a controller instance (the first, or a new leader
// after a restart or failover) with informers of its own, and the model's
// view of it.
func (s *simulation) startController() {
	s.t.Helper()
	now := s.clk.Now()
	if s.c != nil && !s.leaderless() {
		s.stopController(now)
	}
	if s.c != nil {
		// A configuration reload (reloadFaults) restarts with new options,
		// and so may a leader that takes over from one that ran the old.
		s.model.Configure(modelConfig(s.opts))
	}
	s.nextLeader = time.Time{}
	s.startedAt = now
	s.gen++
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancel = cancel
	ctx = klog.NewContext(ctx, klog.Background().V(10))
	// The per-node retry back-off (5 ms and up) is below the simulation's
	// one-second resolution: a retry happens in the same simulated second,
	// as it would in a real one (driverDelays). The cluster-wide eviction
	// rate runs on the simulated clock as it is.
	s.queues = make([]*driverDelays, 2)
	queues := func(name string, _ workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
		q := newDriverDelays(name, s.clk, s.gate)
		q.byName = s.workers > 1
		i := 1
		if name == nodehealth.NodeQueueName {
			i = 0
			q.onGet = s.syncBegins
		}
		s.queues[i] = q
		return q
	}
	s.loops = newLoopClock(s.clk)
	s.metrics = nodehealth.NewMetrics(nil)
	// Wired as the binary wires it (internal/setup/controller): the
	// controller's requests wait at the gate, its informers' lists and
	// watches do not.
	c, err := setupcontroller.New(ctx, setupcontroller.Clients{Client: s.ctrl, Leases: s.kube, NodeWatch: s.kube},
		setupcontroller.Config{Options: s.opts, Metrics: s.metrics, Clock: s.loops, Queues: queues, Recorder: &record.FakeRecorder{}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.c = c
	nodeInf, leaseInf := c.NodeInformer(), c.LeaseInformer()
	s.nodeLister = corelisters.NewNodeLister(nodeInf.GetIndexer())
	s.leaseLister = coordinationlisters.NewLeaseLister(leaseInf.GetIndexer())
	s.informers = []sim.Informer{nodeInf, leaseInf}
	s.fed = &atomic.Int64{}
	s.feeding = &atomic.Bool{}
	s.feeding.Store(true)
	s.feedModel(nodeInf, leaseInf)
	if err := s.api.Track(nodesGVR, nodeInf); err != nil {
		s.t.Fatal(err)
	}
	if err := s.api.Track(leasesGVR, leaseInf); err != nil {
		s.t.Fatal(err)
	}
	// The controller as the binary runs it: its informers, then, once they
	// have listed, its workers, its canary's loops and its resync on
	// goroutines of their own. The workers wait for the driver's grants in
	// the queues (drain), the loops for the simulated clock.
	ran := make(chan struct{})
	s.ran = ran
	go func() {
		defer close(ran)
		c.Run(ctx, s.workers)
	}()
	startCtx, cancelStart := context.WithTimeout(s.ctx, time.Minute)
	defer cancelStart()
	if err := s.api.Settle(startCtx, func() bool { return c.HasSynced() && s.handlersDone() }); err != nil {
		s.t.Fatalf("the controller's caches did not sync: %v (notifications: nodes %d, leases %d sent, %d handled by the controller, %d by the model's handlers)",
			err, s.api.Seen(s.informers[0]), s.api.Seen(s.informers[1]), c.HandledEvents(), s.fed.Load())
	}
	s.flush()
	for _, n := range s.nodes {
		n.unlisted = false
	}
	// A Node deleted while no leader ran is missing from the list this
	// instance made, and no watch told the model of its deletion (seed
	// 2731414471645490661: n0, failing, deleted outright between two
	// leaders; the model still counted it in its zone and held n4 there,
	// where the controller, never having seen n0, tainted it).
	for _, name := range sets.List(s.known) {
		if _, err := s.nodeLister.Get(name); apierrors.IsNotFound(err) {
			s.model.NodeDeleted(now, name)
			s.known.Delete(name)
		}
	}
	// So is a Lease deleted while no leader ran (seed
	// 16782450732837084314: n2's cni Lease deleted a second after the
	// leader stopped; the next one found it missing and tainted n2, the
	// model still held it ready). One the new list holds was created
	// again since: leaseSeen took it out of the set.
	for _, key := range s.takeUnseenLeaseDeletions() {
		node, ext, _ := strings.Cut(key, "/")
		if _, err := s.leaseLister.Leases(simNS).Get(nodehealth.LeaseNameFor(ext, node)); apierrors.IsNotFound(err) {
			s.model.LeaseDeleted(now, node, ext)
		}
	}
	s.model.Start(now)
	s.awaitLoops(func() bool {
		return s.queues[0].turns.Idle() == s.workers && s.queues[1].turns.Idle() == 1
	})
	s.checkView()
	s.trace.Add("t=%s controller %d started", s.at(), s.gen)
	// Its workers start at once, on what it listed.
	s.deliver()
	s.owedAtStop = nil
}

// leaseSeen records that the running instance's Lease watch delivered an
// event of the Lease (unseenLeaseDeletions).
func (s *simulation) leaseSeen(node, ext string) {
	s.observedMu.Lock()
	s.unseenLeaseDeletions.Delete(node + "/" + ext)
	s.observedMu.Unlock()
}

// takeUnseenLeaseDeletions empties unseenLeaseDeletions and returns what it
// held.
func (s *simulation) takeUnseenLeaseDeletions() []string {
	s.observedMu.Lock()
	defer s.observedMu.Unlock()
	deleted := sets.List(s.unseenLeaseDeletions)
	s.unseenLeaseDeletions = sets.New[string]()
	return deleted
}

// stopController stops the running instance, as a crash or a lost
// leadership ends it: its informers stop watching and feed the model no
// more.
func (s *simulation) stopController(now time.Time) {
	s.feeding.Store(false)
	s.owedAtStop = sets.New[string]()
	for _, n := range s.nodes {
		if s.retryOwed(n.name) {
			s.owedAtStop.Insert(n.name)
		}
	}
	s.stop()
	s.model.Stop(now)
	// A Lease deleted unseen is missing from the list the next instance
	// makes: the stopped model takes the deletion now, as it takes an
	// unseen taint removal (seed 8670837094640195926: n4's kube-proxy
	// Lease deleted in a Lease-watch stall whose leader stopped before it
	// ended; the next leader found it missing, the model still held it).
	for _, key := range s.takeUnseenLeaseDeletions() {
		node, ext, _ := strings.Cut(key, "/")
		s.model.LeaseDeleted(now, node, ext)
	}
	// A removal the stopped instance never saw is on the Node the next one
	// lists: the stopped model takes it now, as while no leader runs.
	for _, name := range s.unseenRemovals.takeAll() {
		if s.known.Has(name) {
			s.model.ReadinessTaintRemoved(now, name)
		}
	}
}

func (s *simulation) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.ran
	}
}

// simLoops is how many timed loops a running instance has: the canary's
// check and renewal, and the resync.
const simLoops = 3

// awaitLoops waits until every timed loop of the running instance waits for
// the simulated clock again (a step woke those whose timers came due) and
// ready, if given, holds. Nothing else wakes them, so from then on they
// stay put until the next step.
func (s *simulation) awaitLoops(ready func() bool) {
	s.t.Helper()
	if s.c == nil || s.leaderless() {
		return
	}
	deadline := time.Now().Add(time.Minute)
	for s.loops.waiting() != simLoops || ready != nil && !ready() {
		if time.Now().After(deadline) {
			s.t.Fatalf("t=%s the controller's timed loops did not wait for the clock again: %d of %d wait", s.at(), s.loops.waiting(), simLoops)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// loopClock is the simulated clock as the controller sees it. It keeps the
// instant of each timer its loops arm (After), so that the driver knows how
// many wait for the clock: a loop a step woke is done with its turn when it
// arms its next timer.
type loopClock struct {
	*sim.Clock
	mu    sync.Mutex
	armed []time.Time
}

func newLoopClock(clk *sim.Clock) *loopClock { return &loopClock{Clock: clk} }

// After arms the timer first and counts it after: counted first, it let the
// driver step the clock before the timer was armed, which then came due a
// second later than counted, and the driver waited for a loop that slept
// (a seed of make simulate SEEDS=200 under load). The clock does not move
// between the two: the driver waits for this count.
func (c *loopClock) After(d time.Duration) <-chan time.Time {
	ch := c.Clock.After(d)
	c.mu.Lock()
	c.armed = append(c.armed, c.Now().Add(d))
	c.mu.Unlock()
	return ch
}

// waiting is how many timers armed by the loops have not fired yet.
func (c *loopClock) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	c.armed = slices.DeleteFunc(c.armed, func(at time.Time) bool { return !at.After(now) })
	return len(c.armed)
}

// modelInput is one observation for the model. The inputs of one flush are
// ordered by the delivery that brought them, then by key (Nodes before
// Leases, then by name; one object's in arrival order). Several deliveries
// reach one flush when events are delivered between the workers' requests
// (deliverBetween): the controller saw them one after the other, each with
// its handlers done before the next, and so must the model. Sorted by name
// instead, a recovery delivered after another node's failure reached the
// model first and lifted a suspension the controller kept (seed
// 13028741961077139859, the driver's).
type modelInput struct {
	delivery int64
	key      string
	apply    func()
}

func (s *simulation) observe(key string, apply func()) {
	if key == "" {
		return
	}
	s.observedMu.Lock()
	s.observed = append(s.observed, modelInput{delivery: s.deliveries.Load(), key: key, apply: apply})
	s.observedMu.Unlock()
}

// canaryInput is the key of an observed renewal of the controller's canary:
// it has no node, and each node's sync takes it when that sync begins
// (horizonReachesLater).
const canaryInput = "2/canary"

// syncStart is a sync of a node begun after a delivery: it sees every event
// delivered up to it.
type syncStart struct {
	node     string
	delivery int64
}

// syncBegins records that a worker took a node's key from the queue.
func (s *simulation) syncBegins(node string) {
	s.observedMu.Lock()
	s.syncs = append(s.syncs, syncStart{node: node, delivery: s.deliveries.Load()})
	s.observedMu.Unlock()
}

// flush hands the queued observations to the model, those one sync of
// their node took together in one Model.Together.
func (s *simulation) flush() {
	s.observedMu.Lock()
	inputs, syncs := s.observed, s.syncs
	s.observed, s.syncs = nil, nil
	s.observedMu.Unlock()
	// Lags and releases depend on deliveries, not on the inputs' order:
	// one sort places the releases among the rest.
	lags, releases := horizonReachesLater(inputs, syncs)
	for i, nodes := range lags {
		apply := inputs[i].apply
		inputs[i].apply = func() {
			for _, node := range nodes {
				s.model.HorizonReachesLater(node)
			}
			apply()
		}
	}
	at := s.clk.Now()
	for i := range releases {
		node := inputNode(releases[i].key)
		releases[i].apply = func() { s.model.HorizonReaches(s.late(at), node) }
	}
	inputs = append(inputs, releases...)
	sortInputs(inputs)
	for _, group := range byDelivery(takenTogether(inputs, syncs)) {
		if len(group) == 1 {
			group[0].apply()
			continue
		}
		s.together++
		s.model.Together(func() {
			for _, in := range group {
				in.apply()
			}
		})
	}
}

// takenTogether groups inputs, in delivery order, by the sync of their node
// that first sees them: an input joins the next one of its node when no
// sync of that node began between the two deliveries. The work queue holds
// a key once, so every event that reaches a node while its key waits, or
// while a sync of it runs, reaches its next sync with the others (seed
// 14379374699796990078). A group takes the place of its last input: the
// sync comes after it. An input whose handler failed to queue its node is
// never grouped with an earlier one on that account: the sync that sees
// the later input sees both, in any controller. A canary renewal is no
// node's: it stays in its place, and each node takes it at its next sync
// (horizonReachesLater).
func takenTogether(inputs []modelInput, syncs []syncStart) [][]modelInput {
	next := make([]int, len(inputs))
	seen := map[string]int{}
	for i := len(inputs) - 1; i >= 0; i-- {
		node := inputNode(inputs[i].key)
		next[i] = -1
		if j, ok := seen[node]; ok {
			next[i] = j
		}
		seen[node] = i
	}
	var groups [][]modelInput
	waiting := map[string][]modelInput{}
	for i, in := range inputs {
		node := inputNode(in.key)
		group := append(waiting[node], in)
		if j := next[i]; j >= 0 && in.key != canaryInput && !syncedBetween(syncs, node, in.delivery, inputs[j].delivery) {
			waiting[node] = group
			continue
		}
		delete(waiting, node)
		groups = append(groups, group)
	}
	return groups
}

// horizonReachesLater names, for each observed canary renewal (by its index
// in inputs), the nodes whose next sync takes the horizon's move it may bring
// only after later deliveries, and returns for each such node an input that
// releases it where that sync began (its apply is the caller's). The
// controller queues the nodes a move concerns; each sync sees what was
// delivered before it began: the node's own renewal (seed
// 17374736721536902828) or another node's change that moves the blast
// radius's count (seed 775137847053701018: a node of the zone started
// leaving before the failing node's sync, which found the zone past its
// threshold). A node whose next sync saw nothing delivered after the move
// takes it in its place.
func horizonReachesLater(inputs []modelInput, syncs []syncStart) (map[int][]string, []modelInput) {
	lags := map[int][]string{}
	var releases []modelInput
	deliveries := make([]int64, len(inputs))
	for i, in := range inputs {
		deliveries[i] = in.delivery
	}
	slices.Sort(deliveries)
	// deliveredBetween: an input was delivered after from, at or before to.
	deliveredBetween := func(from, to int64) bool {
		i, _ := slices.BinarySearch(deliveries, from+1)
		return i < len(deliveries) && deliveries[i] <= to
	}
	for i, canary := range inputs {
		if canary.key != canaryInput {
			continue
		}
		next := map[string]int64{}
		for _, sy := range syncs {
			if at, ok := next[sy.node]; sy.delivery >= canary.delivery && (!ok || sy.delivery < at) {
				next[sy.node] = sy.delivery
			}
		}
		for _, node := range slices.Sorted(maps.Keys(next)) {
			at := next[node]
			if !deliveredBetween(canary.delivery, at) {
				continue
			}
			lags[i] = append(lags[i], node)
			releases = append(releases, modelInput{delivery: at, key: horizonReleaseKey + node})
		}
	}
	return lags, releases
}

// sortInputs orders inputs by the delivery that brought them, then by key.
func sortInputs(inputs []modelInput) {
	slices.SortStableFunc(inputs, func(a, b modelInput) int {
		return cmp.Or(cmp.Compare(a.delivery, b.delivery), strings.Compare(a.key, b.key))
	})
}

// horizonReleaseKey prefixes the input that releases a node at the sync that
// takes the horizon's move (horizonReachesLater): after every observation
// of its delivery, which that sync saw.
const horizonReleaseKey = "8/"

// syncedBetween reports whether a sync of the node began after delivery from
// and before delivery to: it saw the first and not the second.
func syncedBetween(syncs []syncStart, node string, from, to int64) bool {
	for _, sy := range syncs {
		if sy.node == node && sy.delivery >= from && sy.delivery < to {
			return true
		}
	}
	return false
}

// byDelivery joins the groups that end in the same delivery: no sync begins
// before every handler has taken the delivery (settle), and one delivery
// brings many events at a time when a watch relists (after a 410, or a
// failed list): the controller evaluates none of its nodes between them, and
// the model must not either. Taken one by one, a failure observed first was
// judged on a blast radius without the failures the same list brought after
// it (seed 15986462990688217337: n3's and n7's releases came in one relist
// and tripped their zone together; the model tainted n3 on the count before
// n7's).
func byDelivery(groups [][]modelInput) [][]modelInput {
	var out [][]modelInput
	for _, g := range groups {
		if n := len(out); n > 0 {
			last := out[n-1]
			if last[len(last)-1].delivery == g[len(g)-1].delivery {
				out[n-1] = append(last, g...)
				continue
			}
		}
		out = append(out, g)
	}
	return out
}

// inputNode is the node a modelInput's key names ("0/node" or
// "1/node/extension").
func inputNode(key string) string {
	_, rest, _ := strings.Cut(key, "/")
	node, _, _ := strings.Cut(rest, "/")
	return node
}

// counted counts every notification h receives, whatever it does with it
// (handlersDone).
func (s *simulation) counted(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	fed, feeding := s.fed, s.feeding
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if feeding.Load() {
				h.OnAdd(obj, false)
			}
			fed.Add(1)
		},
		UpdateFunc: func(o, n interface{}) {
			if feeding.Load() {
				h.OnUpdate(o, n)
			}
			fed.Add(1)
		},
		DeleteFunc: func(obj interface{}) {
			if feeding.Load() {
				h.OnDelete(obj)
			}
			fed.Add(1)
		},
	}
}

// feedModel tells the model what the controller's informers observe, at the
// instant they observe it.
func (s *simulation) feedModel(nodes cache.SharedIndexInformer, leases sim.Informer) {
	_, _ = nodes.AddEventHandler(s.counted(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			node, at := obj.(*v1.Node), s.clk.Now()
			removed := s.unseenRemovals.shownBy(node)
			s.observe("0/"+node.Name, func() {
				if s.known.Has(node.Name) {
					// Listed again by a new controller instance.
					s.model.NodeUpdated(s.late(at), s.modelNode(node))
				} else {
					s.known.Insert(node.Name)
					s.model.NodeAdded(s.late(at), s.modelNode(node))
				}
				if removed {
					s.model.ReadinessTaintRemoved(s.late(at), node.Name)
				}
			})
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n, at := oldObj.(*v1.Node), newObj.(*v1.Node), s.clk.Now()
			changed := o.UID != n.UID || o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID || !labels.Equals(o.Labels, n.Labels) ||
				leavingKey(o) != leavingKey(n)
			removed := s.unseenRemovals.shownBy(n)
			if changed || removed {
				s.observe("0/"+n.Name, func() {
					if changed {
						s.model.NodeUpdated(s.late(at), s.modelNode(n))
					}
					if removed {
						s.model.ReadinessTaintRemoved(s.late(at), n.Name)
					}
				})
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			deleted, at := obj.(*v1.Node), s.clk.Now()
			name := deleted.Name
			s.unseenRemovals.forget(deleted)
			s.observe("0/"+name, func() {
				s.known.Delete(name)
				s.model.NodeDeleted(s.late(at), name)
			})
		},
	}))
	observe := func(old, l *coordinationv1.Lease) {
		if l.Name == nodev1alpha1.ControllerCanaryLease {
			// The model judges the own view from the controller's own
			// renewals of its canary, as the canary does (CheckView).
			if ptr.Deref(l.Spec.HolderIdentity, "") == s.opts.Identity && l.Spec.RenewTime != nil {
				renewTime, at := l.Spec.RenewTime.Time, s.clk.Now()
				s.observe(canaryInput, func() { s.model.CanaryRenewed(s.late(at), renewTime) })
			}
			return
		}
		ext, node, err := nodev1alpha1.ParseLeaseName(l.Name)
		if err != nil {
			return
		}
		s.leaseSeen(node, ext)
		holder, at, key := ptr.Deref(l.Spec.HolderIdentity, ""), s.clk.Now(), "1/"+node+"/"+ext
		if holder == "" {
			// A released Lease whose reason changed is observed as well:
			// the renewal and the new release between the two were missed
			// (a stalled watch, a relist), and the controller judges the
			// reason it reads now.
			reason := l.Annotations[nodev1alpha1.ReasonAnnotation]
			if old == nil || ptr.Deref(old.Spec.HolderIdentity, "") != "" || old.Annotations[nodev1alpha1.ReasonAnnotation] != reason {
				s.observe(key, func() { s.model.LeaseReleased(s.late(at), node, ext, reason) })
			}
			return
		}
		if old == nil || ptr.Deref(old.Spec.HolderIdentity, "") == "" || !old.Spec.RenewTime.Equal(l.Spec.RenewTime) {
			d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
			var renewTime time.Time
			if l.Spec.RenewTime != nil {
				renewTime = l.Spec.RenewTime.Time
			}
			s.observe(key, func() { s.model.LeaseRenewedAt(s.late(at), node, ext, d, renewTime) })
		}
	}
	_, _ = leases.AddEventHandler(s.counted(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { observe(nil, obj.(*coordinationv1.Lease)) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			observe(oldObj.(*coordinationv1.Lease), newObj.(*coordinationv1.Lease))
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			l := obj.(*coordinationv1.Lease)
			if ext, node, err := nodev1alpha1.ParseLeaseName(l.Name); err == nil {
				s.leaseSeen(node, ext)
				at := s.clk.Now()
				s.observe("1/"+node+"/"+ext, func() { s.model.LeaseDeleted(s.late(at), node, ext) })
			}
		},
	}))
}

// late is when the model takes an observation stamped at: a notification
// the informer handled after the driver's last delivery of a second (a relist
// after a closed watch runs on the reflector's wall-clock back-off) is
// flushed after the model moved on to the next second, and counts then, as
// the driver cannot place it earlier.
func (s *simulation) late(at time.Time) time.Time {
	if now := s.model.Now(); at.Before(now) {
		return now
	}
	return at
}

func (s *simulation) at() string { return s.clk.Elapsed().String() }

// handlersDone reports whether the controller's handlers and the model's have
// run for every notification the informers sent (Settle waits only for its
// own handler's): each handler of a shared informer runs on a goroutine of
// its own.
func (s *simulation) handlersDone() bool {
	var sent int64
	for _, inf := range s.informers {
		sent += s.api.Seen(inf)
	}
	return s.c.HandledEvents() == sent && s.fed.Load() == sent
}

// drain runs the controller's workers until its queues are empty and
// reports whether it did anything (or has not caught up yet). With one
// worker the driver runs each sync and each escalation itself, in turn; with
// several, drainWorkers interleaves them.
func (s *simulation) drain() bool {
	if !s.handlersDone() {
		time.Sleep(100 * time.Microsecond)
		return true
	}
	for _, q := range s.queues {
		q.release()
	}
	if s.workers > 1 {
		return s.drainWorkers()
	}
	worked := false
	nodes, evictions := s.queues[0], s.queues[1]
	for nodes.Len() > 0 || evictions.Len() > 0 {
		worked = true
		if nodes.Len() > 0 {
			s.serveAlone(nodeWorker, nodes)
		}
		if evictions.Len() > 0 {
			s.serveAlone(evictionWorker, evictions)
		}
	}
	return worked
}

// serveAlone has one worker take the next key of q and runs it, alone,
// until it waits for work again: its requests go through one at a time.
func (s *simulation) serveAlone(name string, q *driverDelays) {
	s.gateStep(func(ctx context.Context) error { return q.turns.Grant(ctx, name) })
	for len(s.gate.Held()) > 0 {
		s.gateStep(func(ctx context.Context) error { return s.gate.Release(ctx, 0) })
	}
}

func (s *simulation) settle() {
	s.t.Helper()
	// Minutes, not seconds: after a 410 or a failed list a reflector waits
	// its back-off in wall-clock time, 0.8 s doubling to 30 s with as much
	// jitter, reset only after 2 min without an error, and the 410s and
	// failed lists of one long seed add up (seed 9372696895538741622
	// waited more than the minute this once was).
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Minute)
	defer cancel()
	if err := s.api.Settle(ctx, func() bool { return !s.drain() }); err != nil {
		var sent int64
		for _, inf := range s.informers {
			sent += s.api.Seen(inf)
		}
		s.t.Fatalf("t=%s not settled: %v (notifications: %d sent, %d handled by the controller, %d by the model's handlers)",
			s.at(), err, sent, s.c.HandledEvents(), s.fed.Load())
	}
	s.flush()
}

// deliver delivers the pending events one at a time (in a seeded order across
// watches), letting the controller act on each before the next, until
// nothing is left to deliver. One at a time, the controller's evaluations
// follow its observations as the model's do; whether two events reach a
// worker together is a matter of goroutine timing, which a seed cannot fix.
func (s *simulation) deliver() {
	for range 10000 {
		s.deliveries.Add(1)
		n := s.api.Deliver(1)
		s.releaseRetries()
		s.settle()
		if n > 0 {
			s.compareEvent(fmt.Sprintf("after delivery %d", s.deliveries.Load()))
		}
		// A watch closed in this second re-opens while the settle waits
		// for it, and the history replays what it missed: deliverable
		// then, though nothing was delivered (seed 15692526044995049071:
		// another writer's taint, written as the watches closed).
		if n == 0 && !s.retriesHeld() && s.api.Deliverable() == 0 {
			return
		}
	}
	s.t.Fatal("events kept coming: the controller writes without end")
}

// releaseRetries releases every queue's retries held for the next delivery.
func (s *simulation) releaseRetries() {
	for _, q := range s.queues {
		q.releaseRetries()
	}
}

// retriesHeld reports whether a queue holds a retry for the next delivery.
func (s *simulation) retriesHeld() bool {
	for _, q := range s.queues {
		if q.heldRetries() > 0 {
			return true
		}
	}
	return false
}

// checkView compares the own view as the controller's canary loop judged it
// (the nodehealth_own_view_stale gauge) with the model's, after the loop
// has run for the second. The model checks at the times the loop must
// (Model.NextViewCheck: at the start, an interval after each check, or when
// the view would turn stale if that is sooner), the loop at its own; they
// differ at the first second one of them checks wrong. So a stale view is
// current again at the first check after a new renewal was observed, up to
// an interval later, with whatever the catching-up watch delivered
// meanwhile taken first, as in production. (Until 2026-12-01 the driver
// called the canary's check itself, at first at every second: a stale view
// recovered in the very second its renewal came, before the loop's check.)
func (s *simulation) checkView() {
	now := s.clk.Now()
	want := s.model.ViewStale()
	if at := s.model.NextViewCheck(); !at.IsZero() && !now.Before(at) {
		want = s.model.CheckView(now)
	}
	stale := testutil.ToFloat64(s.metrics.OwnViewStale) == 1
	if stale != want {
		s.trace.Add("t=%s own view: controller stale=%v, model stale=%v", s.at(), stale, want)
		s.t.Errorf("t=%s the controller's canary judges its own view stale=%v, the model stale=%v\nrecent trace:\n%s", s.at(), stale, want, s.trace.Tail(40))
	}
	if stale != s.viewStale {
		s.viewStale = stale
		s.trace.Add("t=%s own view stale=%v", s.at(), stale)
	}
}

// step is one simulated second. It reports false when the run must stop.
func (s *simulation) step() bool {
	s.clk.Forward(1)
	s.awaitLoops(nil)
	now := s.clk.Now()
	s.kube.ClearActions()
	s.ctrl.ClearActions()
	// Every event of the world adds a line to the trace; renewals do not.
	mark := s.trace.Len()
	if s.leaderless() {
		if now.Before(s.nextLeader) {
			return s.stepLeaderless(now, mark)
		}
		// The next leader takes over at the start of the second, from
		// what it lists.
		s.startController()
	}
	// What came due with time first, in both: the view's staleness, then
	// the timers, before anything that happens in this second.
	s.checkView()
	s.model.Advance(now)
	s.settle()
	s.compareEvent("after the timers")
	// The world's writes of the second come next, all before it is
	// delivered: what the controller writes from here on meets them.
	s.model.WorldWrites(now)
	s.faults(now)
	s.heartbeats(now)
	if s.leaderless() {
		// A failover stopped the leader in this second.
		return s.compare(s.trace.Len() == mark)
	}
	s.deliver()
	s.model.Advance(now)
	return s.compare(s.trace.Len() == mark) && !s.eventDiff
}

// heartbeats renews the Leases of the agents that are alive and due.
func (s *simulation) heartbeats(now time.Time) {
	revived := map[*simAgent]bool{}
	for _, a := range s.revive[now] {
		a.alive, a.released = true, ""
		a.nextRenew = now
		revived[a] = true
	}
	delete(s.revive, now)
	for _, n := range s.nodes {
		// A revival is an event: the second is not quiet. Untraced, a
		// revival in the very second its Lease expired (seed
		// 2464017126761181261) made the controller's two writes, the
		// expiry's and the renewal's, look like writes at steady state.
		for _, a := range n.agents {
			if revived[a] {
				s.trace.Add("t=%s %s/%s comes back", s.at(), n.name, a.ext)
			}
		}
		if now.Equal(n.downUntil) {
			n.boot++
			s.updateNode(n)
			s.trace.Add("t=%s %s is back (boot %d)", s.at(), n.name, n.boot)
		}
		if !now.Before(n.downFrom) && now.Before(n.downUntil) {
			continue
		}
		for _, a := range n.agents {
			if (a.ext == "cni" && !n.cni) || !a.alive || a.released != "" || now.Before(a.nextRenew) {
				continue
			}
			if a.ext == "kube-proxy" && n.leavingTaint == nodev1alpha1.TaintToBeDeletedByClusterAutoscaler {
				// kube-proxy's /healthz answers 503 on a node the
				// autoscaler removes: its heartbeat releases the Lease.
				a.released = heartbeatProbeFailed
				s.release(n, a, heartbeatProbeFailed)
				continue
			}
			a.nextRenew = now.Add(simRenewEvery)
			// A renewal of a Lease silent for its duration and grace ends
			// an expiry, maybe in the very second the controller writes
			// it (a re-created node's first renewal, seed
			// 16355690943911723483): an event, like a revival, so the
			// second is not quiet.
			name := a.leaseName(n)
			if last, ok := s.renewedAt[name]; ok && now.Sub(last) >= simLeaseSeconds*time.Second+s.opts.RenewalGrace {
				s.trace.Add("t=%s %s/%s renews a Lease silent since %s", s.at(), n.name, a.ext, last.Sub(sim.Epoch))
			}
			s.renewedAt[name] = now
			s.writeLease(n, a, func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity = ptr.To(a.ext + "-" + n.name)
				l.Spec.RenewTime = &metav1.MicroTime{Time: n.renewTime(now)}
				delete(l.Annotations, nodev1alpha1.ReasonAnnotation)
			})
		}
	}
}

func (s *simulation) writeLease(n *simNode, a *simAgent, mutate func(*coordinationv1.Lease)) {
	leases := s.kube.CoordinationV1().Leases(simNS)
	l, err := leases.Get(s.ctx, a.leaseName(n), metav1.GetOptions{})
	if err != nil {
		l = s.leaseObject(n, a)
		mutate(l)
		if _, err := leases.Create(s.ctx, l, metav1.CreateOptions{}); err == nil && a.registered {
			// A first Lease that registers its extension changes the
			// node's list: not a renewal, so the second is not quiet.
			s.trace.Add("t=%s %s/%s registers", s.at(), n.name, a.ext)
		}
		return
	}
	mutate(l)
	_, _ = leases.Update(s.ctx, l, metav1.UpdateOptions{}) // a refused write is retried at the next renewal
}

// faults draws this second's events from the seed.
func (s *simulation) faults(now time.Time) {
	r := s.rng
	if !s.stallUntil.IsZero() && !now.Before(s.stallUntil) {
		s.api.Unstall(leasesGVR)
		s.stallUntil = time.Time{}
		s.trace.Add("t=%s lease watch resumes", s.at())
	}
	for _, n := range s.nodes {
		for _, a := range n.agents {
			switch {
			case a.alive && a.released == "" && r.Chance(0.003):
				a.alive = false
				s.reviveAt(now.Add(time.Duration(5+r.Intn(90))*time.Second), a)
				s.trace.Add("t=%s %s/%s dies", s.at(), n.name, a.ext)
			case a.alive && a.released == "" && !a.registered && r.Chance(0.001):
				a.released = "Crash"
				s.release(n, a, "Crash")
				s.reviveAt(now.Add(time.Duration(5+r.Intn(60))*time.Second), a)
			}
		}
		switch {
		case r.Chance(0.002):
			// An update: the updater (or, without one, kube-proxy) releases
			// for maintenance, the node reboots a while later.
			a := n.agents[0]
			if len(n.agents) > 2 {
				a = n.agents[2]
			}
			if a.alive && a.released == "" {
				a.released = nodev1alpha1.ReasonUpdating
				s.release(n, a, nodev1alpha1.ReasonUpdating)
				s.reboot(n, now.Add(time.Duration(5+r.Intn(30))*time.Second))
				// The agent renews once the Node shows the new boot, and
				// may itself be slow to come back.
				s.reviveAt(n.downUntil.Add(time.Duration(1+r.Intn(30))*time.Second), a)
			}
		case r.Chance(0.002):
			s.reboot(n, now)
		case r.Chance(0.001):
			n.cni = !n.cni
			s.updateNode(n)
			// The CNI DaemonSet's pod starts a moment after the label:
			// its first renewal is never seen in the same second as the
			// label (which the controller could not order either).
			n.agents[1].nextRenew = now.Add(time.Duration(1+r.Intn(3)) * time.Second)
			s.trace.Add("t=%s %s cni=%v", s.at(), n.name, n.cni)
		}
	}
	switch {
	case s.stallUntil.IsZero() && r.Chance(0.006):
		// The controller's Lease watch stalls; its writes still go through.
		s.stallUntil = now.Add(time.Duration(3+r.Intn(40)) * time.Second)
		s.api.Stall(leasesGVR, nil)
		s.trace.Add("t=%s lease watch stalls until %s", s.at(), s.stallUntil.Sub(sim.Epoch))
	case r.Chance(0.003):
		zone := fmt.Sprintf("z%d", r.Intn(s.zones))
		back := now.Add(time.Duration(10+r.Intn(90)) * time.Second)
		for _, n := range s.nodes {
			if n.zone == zone && n.agents[0].alive {
				n.agents[0].alive = false
				s.reviveAt(back, n.agents[0])
			}
		}
		s.trace.Add("t=%s kube-proxy dies in zone %s", s.at(), zone)
	case r.Chance(0.001):
		back := now.Add(time.Duration(10+r.Intn(90)) * time.Second)
		for _, n := range s.nodes {
			if n.agents[0].alive {
				n.agents[0].alive = false
				s.reviveAt(back, n.agents[0])
			}
		}
		s.trace.Add("t=%s kube-proxy dies everywhere", s.at())
	case r.Chance(0.004):
		if now.Before(s.lagUntil) {
			// The model takes every decision of the old instance as
			// written, and a new one starts from what is written: during
			// an outage of the writes, or while catching up after it, the
			// two would start from different Nodes (seed
			// 3843517428554295788: a taint lost in an outage, which the
			// model started its eviction clock on at the restart, and the
			// new instance wrote after its start grace). The draw is made
			// all the same, so that the stream does not depend on it.
			s.trace.Add("t=%s no restart while the controller catches up after an outage", s.at())
			break
		}
		if s.leaderless() {
			s.trace.Add("t=%s no restart: no leader runs", s.at())
			break
		}
		if gap := s.failoverGap(); gap > 0 {
			s.failover(gap)
			break
		}
		s.startController()
	case len(s.nodes) < 12 && r.Chance(0.002):
		s.join(now, r.Chance(0.5))
	case r.Chance(0.001):
		s.recreate(s.nodes[r.Intn(len(s.nodes))], now, r.Chance(0.5))
	case r.Chance(0.005):
		s.api.CloseWatches(nodesGVR)
		s.api.CloseWatches(leasesGVR)
		s.trace.Add("t=%s watches closed", s.at())
	case r.Chance(0.005):
		s.api.Inject(sim.Fault{Verb: "patch", Resource: "nodes", Kind: sim.Conflict})
		s.trace.Add("t=%s next node patch conflicts", s.at())
	case r.Chance(0.003):
		s.api.Inject(sim.Fault{Verb: "patch", Resource: "nodes", Kind: sim.LostAnswer})
		s.trace.Add("t=%s next node patch's answer is lost", s.at())
	}
	// Where the schedule's restarts happen: before the other writers'
	// writes of this second (seed 14092126669512402196).
	s.reloadFaults(now)
	s.leavingFaults(now)
	s.apiFaults(now)
	s.skewFaults(now)
	s.zoneFaults()
	s.excludeFaults()
	s.unseenRecreations(now)
	s.leaseDeletions()
	s.nodeDeletions(now)
	s.canaryFaults()
	s.writerFaults(now)
}

func (s *simulation) reviveAt(at time.Time, a *simAgent) {
	s.revive[at.Truncate(time.Second)] = append(s.revive[at.Truncate(time.Second)], a)
}

func (s *simulation) release(n *simNode, a *simAgent, reason string) {
	s.writeLease(n, a, func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = ptr.To("")
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[nodev1alpha1.ReasonAnnotation] = reason
	})
	s.trace.Add("t=%s %s/%s releases (%s)", s.at(), n.name, a.ext, reason)
}

// reboot takes the node down at `at` for a few seconds: its heartbeats are
// silent, and the kubelet reports the new boot when it is back.
func (s *simulation) reboot(n *simNode, at time.Time) {
	n.downFrom = at
	n.downUntil = at.Add(time.Duration(2+s.rng.Intn(10)) * time.Second)
	s.trace.Add("t=%s %s reboots from %s until %s", s.at(), n.name, at.Sub(sim.Epoch), n.downUntil.Sub(sim.Epoch))
}

func (s *simulation) updateNode(n *simNode) {
	node, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if n.cni != (node.Labels["cni"] == "true") {
		if n.cni {
			if node.Labels == nil { // a node without a zone label may have none
				node.Labels = map[string]string{}
			}
			node.Labels["cni"] = "true"
		} else {
			delete(node.Labels, "cni")
		}
		if node, err = s.kube.CoreV1().Nodes().Update(s.ctx, node, metav1.UpdateOptions{}); err != nil {
			s.t.Fatalf("updating node %s: %v", n.name, err)
		}
	}
	// The kubelet reports a new boot in the status, which an update of the
	// Node itself would drop (the status subresource).
	if node.Status.NodeInfo.BootID != n.bootID() {
		node.Status.NodeInfo.BootID = n.bootID()
		if _, err := s.kube.CoreV1().Nodes().UpdateStatus(s.ctx, node, metav1.UpdateOptions{}); err != nil {
			s.t.Fatalf("updating the status of node %s: %v", n.name, err)
		}
	}
}

// compare requires the controller's observable state to equal the model's,
// records both in the trace, and checks the invariants.
func (s *simulation) compare(quiet bool) bool {
	s.t.Helper()
	s.settleTiedTurns(true, func(n *simNode, obj *v1.Node) bool {
		return n.evicted || nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoExecute)
	})
	s.settleHolds()
	want := s.model.Nodes()
	held := sets.New(s.model.Held()...)
	var diffs, line, messages []string
	if now := s.clk.Now(); s.viewStale && now.Before(s.lagUntil) && s.lagUntil.Before(now.Add(outageCatchUp)) {
		// A gate the outage left pending waits for the own-view guard
		// to lift, and the guard can outlast the outage by more than the
		// catching up (a Lease-watch stall that began in it; seed
		// 3166674346706394344: stale from 2m27s to past 3m4s after an
		// outage that ended at 2m34s): the catching up counts from the
		// lift.
		s.lagUntil = now.Add(outageCatchUp)
		s.retriesUntil = s.lagUntil
	}
	lagging, behind := s.clk.Now().Before(s.lagUntil), false
	// A write retried after an outage is no steady-state write, also once
	// the compared view caught up: a write it does not show (a lifecycle
	// condition) waits out the queue's back-off (seed 2464017126761181261,
	// a DrainInProgress=False whose answer was lost, written again 2 s
	// after the outage; the controller cannot know the first was applied).
	quiet = quiet && !s.clk.Now().Before(s.retriesUntil)
	untainted, refused := s.taintRemovals()
	for _, n := range s.nodes {
		if n.unlisted {
			// Created while no leader runs: nothing has listed it yet,
			// neither the next leader nor, through it, the model.
			line = append(line, n.name+"=unlisted")
			continue
		}
		w := want[n.name]
		// While no leader runs, only another writer removes the taint,
		// and no evaluation ends the failure: the next leader decides.
		// A removal the model holds the failure through is a suspension's
		// hold, not an ungate, though the Node may not say so: with the
		// hold's condition write refused in an outage, the taint's removal
		// went through alone (seed 11483265514425348654).
		heldByModel := w.Evicted && w.ConditionReason == nodev1alpha1.ReasonGatingSuspended
		if n.evicted && !s.leaderless() && !heldByModel && (untainted.Has(n.name) || refused.Has(n.name) && !w.Evicted) {
			// Ungated within the second, perhaps gated again (a reboot):
			// the escalated failure ended with the taint. An ungate the
			// controller decided and the API refused ended it too where
			// the model ungated: which of a renewal and a reboot in the
			// same second comes first is the delivery order's (seeds
			// 15726260585636682009, 5430220600292196003): the model may
			// see the reboot first and never ungate, and so may the
			// controller, whose ungate then is never sent.
			if !untainted.Has(n.name) {
				s.trace.Add("t=%s %s: the controller's ungate was refused; its failure ended, as the model's", s.at(), n.name)
			}
			n.evicted, n.budgetAllows, n.lastAttempt, n.attemptBy = false, time.Time{}, time.Time{}, 0
			s.deletePods(n)
			s.createPods(n, fmt.Sprintf("-%d", s.clk.Elapsed()/time.Second))
		}
		obj, err := s.kube.CoreV1().Nodes().Get(s.ctx, n.name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		got := model.NodeView{Tainted: nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoSchedule),
			NoExecute: nodeutil.HasTaint(obj, simTaintKey, v1.TaintEffectNoExecute)}
		for _, c := range obj.Status.Conditions {
			if c.Type == nodev1alpha1.SystemExtensionsReadyCondition {
				got.ConditionStatus, got.ConditionReason = string(c.Status), c.Reason
				messages = append(messages, c.Message)
			}
		}
		// Evicted lasts as long as the failure: while the node is tainted
		// or held, and while no leader runs to end it (another writer may
		// have removed the taint meanwhile).
		got.Evicted = n.evicted && (s.leaderless() || got.Tainted || got.ConditionReason == nodev1alpha1.ReasonGatingSuspended)
		w.BootRecord = ""
		owed := s.owedAtStop.Has(n.name)
		if got != w && owed {
			// Seed 17658583345655167450: n1's taint patch was applied
			// with its answer lost, and the leader stopped before the
			// retry that writes its condition.
			s.trace.Add("t=%s %s: controller %s, model %s (a retry the stopped leader owed)", s.at(), n.name, viewString(got), viewString(w))
		} else if got != w && lagging {
			// After an outage of its writes (apiFaults).
			behind = true
			if now := s.clk.Now(); got.ConditionReason == nodev1alpha1.ReasonGatingSuspended && w.Tainted &&
				s.model.Suspended(n.zone) && s.lagUntil.Before(now.Add(outageCatchUp)) {
				// A gate the outage left pending, held by a guard the
				// model has up too (seed 7860394480821149444: a blast
				// radius that kube-proxy dying everywhere suspended in
				// the outage, after the model had tainted the first
				// nodes to fail): the catching up counts from the lift.
				s.lagUntil = now.Add(outageCatchUp)
				s.retriesUntil = s.lagUntil
			}
			s.trace.Add("t=%s %s: controller %s, model %s (catching up)", s.at(), n.name, viewString(got), viewString(w))
		} else if got != w {
			diffs = append(diffs, fmt.Sprintf("%s: controller %s, model %s", n.name, viewString(got), viewString(w)))
		} else if got.ConditionStatus != "" && !owed {
			// The message's lists of extensions not ready, once a second:
			// a sync is the unit the controller writes in. After an
			// outage of the writes, a message the retries have not
			// rewritten yet is catching up like a status, and the
			// controller has not caught up before it is rewritten (seeds
			// 7010551424631186898 and 14246223282475081723: the updater
			// renewed during the outage, the condition's status stood, and
			// its message still named the updater's release a second
			// after the outage).
			if d := s.notReadyDiff(n.name, obj, got.ConditionStatus == "False"); d != "" && lagging {
				behind = true
				s.trace.Add("t=%s %s (catching up)", s.at(), d)
			} else if d != "" {
				diffs = append(diffs, d)
			}
		}
		if !lagging && !owed && !s.leaderless() {
			if d := s.extensionListDiff(n, obj); d != "" {
				diffs = append(diffs, d)
			}
		}
		// A lifecycle condition the outage refused is written on a retry,
		// after the queue's back-off, which the compared view does not wait
		// for (seed 8412077615098173412: Drained=True left on a node whose
		// ungate was applied with its answer lost).
		// While no leader runs, another writer may remove the taint of a
		// drained node, and nothing clears its conditions until the next
		// leader decides (seed 17090703982085980484).
		if !s.clk.Now().Before(s.retriesUntil) && !s.leaderless() {
			diffs = append(diffs, lifecycleInvariant(n.name, obj, got, w)...)
		}
		// A taint the controller could not remove during an outage is
		// not one it added while held.
		if held.Has(n.name) && got.Tainted && !((lagging || owed) && got != w) {
			diffs = append(diffs, fmt.Sprintf("%s: tainted while a guard holds it (invariant)", n.name))
		}
		line = append(line, n.name+"="+viewString(got))
		diffs = append(diffs, s.checkDrain(n, w)...)
		if n.evicted && !got.Evicted {
			// The node recovered: its workload comes back.
			n.evicted, n.budgetAllows, n.lastAttempt, n.attemptBy = false, time.Time{}, time.Time{}, 0
			s.deletePods(n)
			s.createPods(n, fmt.Sprintf("-%d", s.clk.Elapsed()/time.Second))
		}
	}
	if lagging && !behind && s.outageUntil.IsZero() && !s.viewStale {
		s.lagUntil = time.Time{} // caught up
	}
	sort.Strings(line)
	state := strings.Join(line, " ")
	diffs = append(diffs, s.checkSteadyWrites(quiet, state+"\n"+strings.Join(messages, "\n"))...)
	s.trace.Add("t=%s %s", s.at(), state)
	diffs = append(diffs, s.wrongEvictions...)
	s.wrongEvictions = nil
	if len(diffs) > 0 {
		s.t.Errorf("t=%s the controller and the model differ:\n  %s\nrecent trace:\n%s", s.at(), strings.Join(diffs, "\n  "), s.trace.Tail(40))
		return false
	}
	return true
}

// immediateRetry retries a failed sync at once (a real controller's first
// back-offs, 5 ms and up, are below the simulation's resolution), seven
// times, as many as a real back-off of 5 ms doubling fits in a second (635
// ms): a sync that keeps failing waits for the next simulated second. With
// three, a lost answer whose retries met the controller's own write not yet
// in its cache and then two conflicts left a condition a second behind its
// taint, where a real controller writes it within 0.2 s (seed
// 13610272208123868948, the driver's).
// Some failures only end once the informer delivers what is pending (a node
// re-created while the controller wrote it): retried at once forever, the
// workers would never let the driver deliver it, where a real controller's
// back-off does.
type immediateRetry struct {
	mu    sync.Mutex
	fails map[string]int
}

func (r *immediateRetry) When(key string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fails == nil {
		r.fails = map[string]int{}
	}
	r.fails[key]++
	if r.fails[key] > 7 {
		return time.Nanosecond
	}
	return 0
}

func (r *immediateRetry) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.fails, key)
}

func (r *immediateRetry) NumRequeues(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fails[key]
}

// driverDelays is a work queue whose delayed adds (a drain's back-off, a
// retry) the driver releases at their simulated instant. The queue's own
// goroutine would move a due item at a moment of real time the driver cannot
// see, so that a retry happened in one simulated second or the next by
// chance (seed 84 failed one run in about sixteen under load).
type driverDelays struct {
	workqueue.TypedRateLimitingInterface[string]
	limiter *immediateRetry
	clk     *sim.Clock
	due     sim.DueItems
	mu      sync.Mutex
	// retries wait for the next delivery (AddRateLimited).
	retries []string
	// byName: Get takes the queued keys in name order (several workers).
	byName bool
	// onGet, when set, is told every key Get hands a worker.
	onGet func(item string)
	// turns: the controller's workers wait in Get for the driver's grant.
	turns *sim.Turns
}

func newDriverDelays(name string, clk *sim.Clock, gate *sim.Gate) *driverDelays {
	limiter := &immediateRetry{}
	return &driverDelays{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: clk}),
		limiter: limiter, clk: clk,
		turns: sim.NewTurns(gate),
	}
}

func (q *driverDelays) ShutDown() {
	q.turns.Stop()
	q.TypedRateLimitingInterface.ShutDown()
}

func (q *driverDelays) AddAfter(item string, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	q.due.Add(item, q.clk.Now().Add(d))
}

// AddRateLimited holds an immediate retry until the driver has delivered the
// next watch event (releaseRetries): a real controller's first back-off (5
// ms) outlasts the watch delivering its own write, so a write refused because
// the cache had not caught up with the previous one succeeds on its retry.
// Retried within the same delivery, it failed on the same stale cache until
// its immediate retries ran out and waited for the next simulated second
// (seed 9661583877554528361).
func (q *driverDelays) AddRateLimited(item string) {
	d := q.limiter.When(item)
	if d > 0 {
		q.AddAfter(item, d)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Contains(q.retries, item) {
		q.retries = append(q.retries, item)
	}
}

// releaseRetries adds the retries held for the next delivery, in the order
// they failed.
func (q *driverDelays) releaseRetries() {
	q.mu.Lock()
	items := q.retries
	q.retries = nil
	q.mu.Unlock()
	for _, item := range items {
		q.Add(item)
	}
}

func (q *driverDelays) heldRetries() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.retries)
}

func (q *driverDelays) Forget(item string) {
	q.limiter.Forget(item)
	q.TypedRateLimitingInterface.Forget(item)
}

func (q *driverDelays) NumRequeues(item string) int { return q.limiter.NumRequeues(item) }

// Get takes the first queued key in name order with byName set: the order
// the informers' handlers queued them in is their goroutines' scheduling,
// which the seed cannot fix, and with several workers it decides which
// worker holds which key when their requests are interleaved.
//
// A worker asks for its next key when it is done with the last: its turn of
// the gate ends, and it waits for the driver's grant.
func (q *driverDelays) Get() (string, bool) {
	if !q.turns.Wait() {
		return "", true
	}
	item, shutdown := q.get()
	if !shutdown && q.onGet != nil {
		q.onGet(item)
	}
	return item, shutdown
}

func (q *driverDelays) get() (string, bool) {
	inner := q.TypedRateLimitingInterface
	n := q.Len()
	if !q.byName || n < 2 {
		return inner.Get()
	}
	items := make([]string, 0, n)
	for range n {
		item, shutdown := inner.Get()
		if shutdown {
			break
		}
		items = append(items, item)
	}
	if len(items) == 0 {
		return "", true
	}
	slices.Sort(items)
	for _, item := range items[1:] {
		inner.Done(item)
		inner.Add(item)
	}
	return items[0], false
}

// release adds the items whose instant has come, in a fixed order.
func (q *driverDelays) release() {
	for _, item := range q.due.Take(q.clk.Now()) {
		q.Add(item)
	}
}

func viewString(v model.NodeView) string {
	s := "untainted"
	if v.Tainted {
		s = "tainted"
	}
	s += "/" + v.ConditionStatus + ":" + v.ConditionReason
	if v.Evicted {
		s += "/evicted"
	}
	if v.NoExecute {
		s += "/noexecute"
	}
	if v.BootRecord != "" {
		// Compared after every event only.
		s += " record " + v.BootRecord
	}
	return s
}

// lifecycleInvariant checks the escalation's KEP-5683 lifecycle conditions
// (docs/controller.md, "Lifecycle conditions"): one of ours is True only on
// a node that is gated (or held) and not leaving (an ungate or leaving clears them;
// a reboot of an escalated node keeps them until its ungate). The model does
// not predict when the drain is done (that is the budgets' business), so
// this is an invariant, not a comparison.
func lifecycleInvariant(name string, obj *v1.Node, got, want model.NodeView) []string {
	var out []string
	for _, kind := range []string{nodev1alpha1.LifecycleConditionDrainInProgress, nodev1alpha1.LifecycleConditionDrained} {
		c := nodeutil.Condition(obj, v1.NodeConditionType(kind))
		if c == nil || c.Reason != nodev1alpha1.LifecycleReasonExtensionFailed || c.Status != v1.ConditionTrue {
			continue
		}
		// Held is gated too: a guard keeps a drain's conditions (a held
		// node is untainted once someone else removed the taint).
		if !got.Tainted && got.ConditionReason != nodev1alpha1.ReasonGatingSuspended || got.ConditionReason == nodev1alpha1.ReasonNodeLeaving {
			out = append(out, fmt.Sprintf("%s: %s=True (ExtensionFailed) on a node that is not gated or is leaving: controller %s, model %s (invariant)",
				name, kind, viewString(got), viewString(want)))
		}
	}
	return out
}
