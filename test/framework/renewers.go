package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
)

// ExtensionRenewers keeps one extension's Lease renewed on many nodes, one
// ExtensionRenewer (nodehealth.io/heartbeat's Renewer) per node, so that a
// test with a fleet of nodes renews their Leases exactly as the extension's
// heartbeats would, back-off after failed writes included. Each node's
// extension can die silently (Stop), release its Lease (Release) and come
// back (Start again).
type ExtensionRenewers struct {
	client kubernetes.Interface
	opts   RenewerOptions

	mu      sync.Mutex
	running map[string]*ExtensionRenewer
	// failed counts the failed writes of the renewers that were stopped;
	// FailedWrites adds the running ones'.
	failed atomic.Int64
}

// parallelStarts is how many Leases Start and Release write at once.
const parallelStarts = 16

// NewExtensionRenewers returns renewers for the Leases of o.Extension in
// o.Namespace, with o's duration, interval and registration; o.Node and
// o.Holder are set per node: each Lease is held by "<node>/<extension>". None
// runs before Start.
func NewExtensionRenewers(client kubernetes.Interface, o RenewerOptions) *ExtensionRenewers {
	return &ExtensionRenewers{client: client, opts: o, running: map[string]*ExtensionRenewer{}}
}

// Start starts renewing the Leases of nodes, parallelStarts at once, and
// returns once each was written, or with every error that kept one from it.
// A node whose Lease is already renewed is left as it is. The renewers log
// with ctx's logger.
func (rs *ExtensionRenewers) Start(ctx context.Context, nodes ...string) error {
	sem := make(chan struct{}, parallelStarts)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		if rs.Renewing(node) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o := rs.opts
			o.Node, o.Holder = node, node+"/"+o.Extension
			r, err := StartExtensionRenewer(ctx, rs.client, o)
			if err != nil {
				errs[i] = fmt.Errorf("node %s: %w", node, err)
				return
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.running[node] = r
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Renewing reports whether node's Lease is being renewed.
func (rs *ExtensionRenewers) Renewing(node string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, ok := rs.running[node]
	return ok
}

// Stop ends the renewals of nodes and leaves their Leases as they are, to
// expire: their extension died silently. The renewers stop together (a write
// in flight is bounded by the renew interval), and none writes once Stop
// returned.
func (rs *ExtensionRenewers) Stop(nodes ...string) {
	var wg sync.WaitGroup
	for _, r := range rs.take(nodes) {
		wg.Go(func() {
			r.Stop()
			rs.failed.Add(r.FailedWrites())
		})
	}
	wg.Wait()
}

// StopAll stops every renewer, as Stop.
func (rs *ExtensionRenewers) StopAll() {
	rs.mu.Lock()
	var nodes []string
	for n := range rs.running {
		nodes = append(nodes, n)
	}
	rs.mu.Unlock()
	rs.Stop(nodes...)
}

// Release ends the renewals of nodes and releases their Leases with reason
// and message, as a heartbeat whose probe failed does, parallelStarts at
// once (each retried until ctx ends, ExtensionRenewer.Release). Nodes whose
// Lease is not renewed are left alone.
func (rs *ExtensionRenewers) Release(ctx context.Context, reason, message string, nodes ...string) error {
	taken := rs.take(nodes)
	sem := make(chan struct{}, parallelStarts)
	errs := make([]error, len(taken))
	var wg sync.WaitGroup
	for i, r := range taken {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = r.Release(ctx, reason, message)
			rs.failed.Add(r.FailedWrites())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FailedWrites counts the writes that failed, of every renewer so far.
func (rs *ExtensionRenewers) FailedWrites() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := rs.failed.Load()
	for _, r := range rs.running {
		n += r.FailedWrites()
	}
	return n
}

// take removes the renewers of nodes from the running ones and returns them.
func (rs *ExtensionRenewers) take(nodes []string) []*ExtensionRenewer {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*ExtensionRenewer
	for _, n := range slices.Compact(slices.Sorted(slices.Values(nodes))) {
		if r, ok := rs.running[n]; ok {
			out = append(out, r)
			delete(rs.running, n)
		}
	}
	return out
}
