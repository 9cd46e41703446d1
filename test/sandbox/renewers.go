package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// The sandbox simulates each node's system extensions with one in-process Lease
// renewer per node and extension, until the extension-heartbeat sidecar runs here as
// a real process. A user controls them with files:
//
//	<dir>/stop/<extension>.<node>   the extension stops and releases its Lease
//	                                (holderIdentity emptied, reason "Stopped");
//	                                removing the file starts it again at once
//	<dir>/crash/<extension>.<node>  the extension stops renewing but keeps its Lease,
//	                                as a crashed or hung agent would; the Lease expires
//
// A simulated reboot (a new status.nodeInfo.bootID) restarts the node's extensions:
// each renews again only after its rebootDelay.

// renewerExtension is one simulated extension.
type renewerExtension struct {
	name string
	// rebootDelay is how long the extension takes to renew again after its node
	// rebooted.
	rebootDelay time.Duration
}

// controlDirs are the directories whose files stop or crash a simulated extension.
type controlDirs struct {
	stop, crash string
}

// reset empties the control directories: a sandbox starts with every extension up.
func (d controlDirs) reset() error {
	for _, dir := range []string{d.stop, d.crash} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// startRenewers creates the Lease of every extension on every sandbox node and keeps
// renewing them on ctx.
func startRenewers(ctx context.Context, env *Env, exts []renewerExtension, dirs controlDirs) error {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "sandbox-extension-renewer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	boots := &bootWatcher{client: client, nodes: map[string]bootState{}}
	for _, node := range env.Nodes {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		boots.nodes[node] = bootState{bootID: n.Status.NodeInfo.BootID}
		for _, ext := range exts {
			r := &renewer{client: client, node: n, ext: ext, dirs: dirs, boots: boots}
			if err := r.renew(ctx, time.Now()); err != nil {
				return fmt.Errorf("creating the Lease of %s on %s: %w", ext.name, node, err)
			}
			go r.run(ctx)
		}
	}
	go boots.run(ctx)
	return nil
}

// bootWatcher polls the nodes' bootIDs and remembers when each last changed.
type bootWatcher struct {
	client kubernetes.Interface
	mu     sync.Mutex
	nodes  map[string]bootState
}

type bootState struct {
	bootID     string
	rebootedAt time.Time
}

func (b *bootWatcher) run(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		names := make([]string, 0, len(b.nodes))
		for n := range b.nodes {
			names = append(names, n)
		}
		b.mu.Unlock()
		for _, name := range names {
			n, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			b.mu.Lock()
			st := b.nodes[name]
			if id := n.Status.NodeInfo.BootID; id != "" && id != st.bootID {
				if st.bootID != "" {
					st.rebootedAt = time.Now()
					fmt.Printf("sandbox: %s rebooted (bootID %s); its extensions restart\n", name, id)
				}
				st.bootID = id
				b.nodes[name] = st
			}
			b.mu.Unlock()
		}
	}
}

func (b *bootWatcher) rebootedAt(node string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nodes[node].rebootedAt
}

// renewer simulates one extension on one node.
type renewer struct {
	client kubernetes.Interface
	node   *corev1.Node
	ext    renewerExtension
	dirs   controlDirs
	boots  *bootWatcher

	released, crashed, waitingForBoot bool
}

func (r *renewer) leaseName() string { return r.ext.name + "." + r.node.Name }

func (r *renewer) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	next := time.Now().Add(sandboxRenewEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		name := r.leaseName()
		stopFile := filepath.Join(r.dirs.stop, name)
		switch {
		case exists(stopFile):
			if !r.released {
				if err := r.release(ctx, "Stopped", "stopped from the sandbox: rm "+display(stopFile)+" starts it again"); err != nil {
					continue
				}
				r.released = true
				fmt.Printf("sandbox: %s on %s stopped and released its Lease\n", r.ext.name, r.node.Name)
			}
			continue
		case exists(filepath.Join(r.dirs.crash, name)):
			if !r.crashed {
				r.crashed = true
				fmt.Printf("sandbox: %s on %s crashed: it no longer renews its Lease\n", r.ext.name, r.node.Name)
			}
			continue
		}
		if back := r.boots.rebootedAt(r.node.Name).Add(r.ext.rebootDelay); now.Before(back) {
			r.waitingForBoot = true
			continue
		}
		if !r.released && !r.crashed && !r.waitingForBoot && now.Before(next) {
			continue
		}
		if err := r.renew(ctx, now); err != nil {
			if ctx.Err() == nil {
				fmt.Printf("sandbox: renewing %s: %v\n", name, err)
			}
			continue
		}
		switch {
		case r.released:
			fmt.Printf("sandbox: %s on %s started again\n", r.ext.name, r.node.Name)
		case r.crashed:
			fmt.Printf("sandbox: %s on %s recovered from its crash\n", r.ext.name, r.node.Name)
		case r.waitingForBoot:
			fmt.Printf("sandbox: %s on %s is back after the reboot\n", r.ext.name, r.node.Name)
		}
		r.released, r.crashed, r.waitingForBoot = false, false, false
		next = now.Add(sandboxRenewEvery)
	}
}

// renew creates the Lease or renews it as its holder.
func (r *renewer) renew(ctx context.Context, now time.Time) error {
	return r.update(ctx, func(l *coordinationv1.Lease) {
		holder := r.ext.name + "@" + r.node.Name
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			l.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		}
		l.Spec.HolderIdentity = &holder
		l.Spec.LeaseDurationSeconds = ptr.To[int32](sandboxLeaseSeconds)
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
		delete(l.Annotations, nodev1alpha1.ReasonAnnotation)
		delete(l.Annotations, nodev1alpha1.MessageAnnotation)
	})
}

// release empties the holder, which asks the controller to treat the extension as
// not ready now, and says why.
func (r *renewer) release(ctx context.Context, reason, message string) error {
	return r.update(ctx, func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = nil
		l.Spec.AcquireTime = nil
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[nodev1alpha1.ReasonAnnotation] = reason
		l.Annotations[nodev1alpha1.MessageAnnotation] = message
	})
}

func (r *renewer) update(ctx context.Context, mutate func(*coordinationv1.Lease)) error {
	leases := r.client.CoordinationV1().Leases(nodev1alpha1.DefaultLeaseNamespace)
	for range 5 {
		l, err := leases.Get(ctx, r.leaseName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name:      r.leaseName(),
				Namespace: nodev1alpha1.DefaultLeaseNamespace,
				Labels:    nodev1alpha1.LeaseLabels(r.ext.name, r.node.Name),
				// Garbage-collected with the node, like the heartbeat sidecar's Leases.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: r.node.Name, UID: r.node.UID}},
			}}
			mutate(l)
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else if err == nil {
			mutate(l)
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		return err
	}
	return errors.New("too many conflicts")
}
