// Package sim is the framework of the deterministic simulations: the
// node-health controller's and the update operator's. A simulation builds its
// components as production does (client-go informers with real reflectors,
// real workqueues) over fake clientsets, and the framework owns everything
// around them:
//
//   - API, the API server: installed into each fake clientset (kube's and
//     nodehealth.io/client-go's alike: API.Install prepends reactors, so the
//     fake's own ObjectTracker is never used), it keeps one object store with
//     a cluster-wide resourceVersion and serves get, list, create, update,
//     merge / strategic merge / JSON patch, delete, the status subresource
//     and pods/eviction as kube-apiserver does where a controller can tell:
//     a set metadata.resourceVersion other than the current one is a 409 (how
//     the controller's merge patches are guarded), creating an existing name
//     is AlreadyExists, a write that changes nothing writes nothing, the main
//     resource keeps the stored status and the status subresource changes
//     only status, finalizers hold deletions, custom resources refuse
//     strategic merge patches (415), and UIDs and generated names come from
//     the seed.
//   - Watches: every event waits in the API until the driver delivers it
//     (Deliver, DeliverAll), to a watch drawn from the seed, so events of one
//     watch keep their order and only different watches' are reordered.
//     Stall holds a resource's events while its writes still succeed, as a
//     stuck watch connection does; CloseWatches ends watches, each with a
//     bookmark of what it delivered (the reflector re-watches from its last
//     resourceVersion and the history replays what it missed); Compact forgets history, so such a re-watch gets 410 Gone
//     and the reflector relists. An event is never dropped while its watch
//     is open; a closed or stopped watch's undelivered events are replaced
//     by what its re-watch or relist brings.
//   - Faults on writes (Inject, SetFaultRate): conflicts, server errors,
//     timeouts, and lost answers (the write is applied, the caller gets a
//     timeout).
//   - Gate (API.InstallGated): a client's requests wait until the driver
//     releases them, one at a time, and the goroutines the gate started run
//     one at a time between their requests; the driver picks which request
//     is served next, so several workers of a controller interleave in an
//     order the seed chooses.
//   - Clock (simulated time), Rand (seeded randomness), Trace (what a run
//     did, hashed to compare runs) and Run (seeds as subtests, the
//     -sim.seed, -sim.seeds and -sim.verbose flags, a replay line for each
//     failed seed).
//
// It never starts goroutines (but those a driver asks a Gate to run), never delivers an event by itself, never draws
// randomness but from the seed (Run's extra seeds aside, which it prints),
// and does not emulate what the simulated components do not depend on:
// validation, defaulting, admission, server-side apply (refused with 415),
// managed fields, namespace existence, graceful pod deletion, pagination (a
// list returns everything), watch bookmarks and watch timeouts,
// resourceVersionMatch=Exact lists of past states.
//
// # Settling
//
// A driver steps the simulation: write or tick the Clock, Deliver some
// events, then API.Settle before looking at the result. What Settle
// guarantees when it returns nil:
//
//   - every delivered event was received by its watcher: Deliver sends on an
//     unbuffered channel and returns only when the receive happened;
//   - every delivered event of a resource with Track-ed informers was passed
//     to a tracked informer's handlers, so that informer's store has it (an
//     informer updates its store before it notifies handlers) and each of its
//     other handlers has it queued: Settle counts deliveries by
//     resourceVersion until Track's handler sees them;
//   - every item an informer listed of a tracked resource (a list at a
//     resourceVersion: reflectors list at "0" or at the one they last
//     synced) was passed to a tracked informer's handlers, and so were the
//     deletions the list implied unless it listed nothing: the informer
//     notifies those first. After such a list Settle needs ListSettlePolls
//     quiet polls, not SettlePolls, for the list of nothing;
//   - Seen counts a notification before Settle counts its delivery as
//     seen, so a driver that compares its own handlers' count with Seen
//     waits for them;
//   - every tracked informer has a watch open, and every watch CloseWatches
//     ended was re-opened (so a reflector in a relist's backoff, which is on
//     the wall clock, 0.8s and doubling, is waited for);
//   - idle() held, and nothing was delivered or written, for SettlePolls
//     consecutive polls SettlePoll apart.
//
// What it cannot guarantee by itself: that the components' own handlers ran.
// Each handler of an informer runs in its own goroutine, so a tracked
// informer's handler seeing an event says only that the controller's handler
// has it queued; a driver whose handlers count what they ran, compared with
// Seen in idle(), closes that gap (both simulations do, and settle with one
// poll). Nor can it see goroutines it is not told of
// (an event broadcaster, a worker that has dequeued but not yet written): the
// driver's idle() must cover those. Deliveries to an informer that is not
// tracked, of a tracked resource, are waited for forever (until ctx ends);
// stopping a tracked informer forgets all counts once. A relist by another
// informer of the same resourceVersion can count a delivery early.
//
// Settle costs about SettlePolls-1 timer sleeps once the informers have caught
// up: Linux rounds SettlePoll (200µs) up to ~1.1ms, so about 2.2ms per settle
// (measured by TestSettleReturnsWithTheStoresCaughtUp, 40 settles after
// delivering 2 events to a Node and a Lease informer: 2.2ms with and without
// -race, on the 2-core machine at load average 1.4). A relist after a 410
// costs the reflector's backoff, 0.8 to 1.6s.
//
// # client-go behaviour to know
//
//   - The fake clientsets answer IsWatchListSemanticsUnSupported, so
//     generated informers never try WatchList; a reflector over a plain
//     cache.ListWatch does (WatchListClient is on by default), and the API
//     refuses sendInitialEvents as a server without the feature does (422),
//     after which the reflector lists and watches.
//   - A reflector takes a watch closed within a second of opening, having
//     carried no event, for an error: it relists after a backoff instead of
//     re-watching. The bookmark CloseWatches sends first keeps real time out
//     of that choice (a relist reads past a stall).
//   - A watch from resourceVersion "0" starts with ADDED events of the current
//     state, and the reflector does not advance its resourceVersion until a
//     non-ADDED event: which is why the API's first resourceVersion is 1, as
//     etcd's, not 0.
//   - A fake clientset records a deep copy of every request forever (and
//     holds its lock while the reactors run): long runs call ClearActions.
//   - The fake's own ObjectTracker keeps resourceVersions per resource, out
//     of the objects, checks no preconditions and cannot hold or replay
//     events, which is why the API has a store of its own; the patch code
//     follows ObjectReaction's.
//
// # A driver
//
//	api := sim.NewAPI(scheme, sim.NewRand(seed))
//	client := fake.NewSimpleClientset()
//	api.Install(&client.Fake)
//	factory := informers.NewSharedInformerFactory(client, 0)
//	nodes, leases := factory.Core().V1().Nodes().Informer(), factory.Coordination().V1().Leases().Informer()
//	api.Track(nodesGVR, nodes)
//	api.Track(leasesGVR, leases)
//	factory.Start(ctx.Done())
//	api.Settle(ctx, idle) // lists done, watches open
//	client.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease, metav1.CreateOptions{})
//	for api.Deliver(1) > 0 {
//		api.Settle(ctx, idle)
//	}
package sim
