package heartbeat

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// Extras the API server adds to the user of a pod-bound service-account token
// (KEP-4193, on by default since Kubernetes 1.30).
const (
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraNodeUID  = "authentication.kubernetes.io/node-uid"
)

// maxMessageLength bounds the nodehealth.io/message annotation: a probe error
// can quote a whole response body, and the message ends up in the node's
// condition and Events.
const maxMessageLength = 1024

// ownerState remembers what is known about the Node's UID.
type ownerState struct {
	// resolved is true once the UID was found, or every way to find it gave a
	// definite "no"; transient errors leave it false so a later write tries
	// again.
	resolved bool
	uid      types.UID
	// warned is set once the missing ownerReference was logged, so that
	// retries do not repeat it at every write.
	warned bool
}

// apply writes want onto the Lease: from the cached copy when there is one,
// with one fresh GET and retry on a conflict (someone else changed the
// Lease), creating it when it does not exist.
func (r *Renewer) apply(ctx context.Context, want target) error {
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		current := r.lease
		if current == nil || attempt > 0 {
			got, err := r.client.GetLease(ctx, r.opts.Namespace, r.name)
			switch {
			case apierrors.IsNotFound(err):
				return r.create(ctx, want)
			case err != nil:
				return fmt.Errorf("reading lease %s/%s: %w", r.opts.Namespace, r.name, err)
			}
			r.lease = got
			current = got
		}
		if !want.hold && holderOf(current) != "" && holderOf(current) != r.opts.Holder {
			// A newer pod of this extension (a DaemonSet surge update) holds
			// it: releasing would gate a node whose extension is healthy.
			klog.FromContext(ctx).Info("Not releasing the Lease: another holder holds it", "holder", holderOf(current), "reason", want.reason)
			return nil
		}
		if want.hold && holderOf(current) != "" && holderOf(current) != r.opts.Holder {
			klog.FromContext(ctx).V(2).Info("Taking over the Lease from another holder", "holder", holderOf(current))
		}
		if current.DeletionTimestamp != nil {
			// Being deleted with its Node; nothing sensible to write.
			return fmt.Errorf("lease %s/%s is being deleted", r.opts.Namespace, r.name)
		}
		next := current.DeepCopy()
		r.ensureOwner(ctx, next)
		r.mutate(next, want)
		updated, err := r.client.UpdateLease(ctx, next)
		if err == nil {
			r.lease = updated
			r.countRelease(want)
			return nil
		}
		lastErr = fmt.Errorf("updating lease %s/%s: %w", r.opts.Namespace, r.name, err)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			// Drop the cache: the next attempt starts from a fresh GET, in
			// case the failure was about our copy.
			r.lease = nil
			return lastErr
		}
		klog.FromContext(ctx).V(2).Info("Lease changed under us; reading it again", "err", err.Error())
	}
	r.lease = nil
	return lastErr
}

func (r *Renewer) create(ctx context.Context, want target) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.opts.Namespace},
	}
	r.ensureOwner(ctx, lease)
	r.mutate(lease, want)
	created, err := r.client.CreateLease(ctx, lease)
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created concurrently; the next write starts from a GET.
			r.lease = nil
		}
		return fmt.Errorf("creating lease %s/%s: %w", r.opts.Namespace, r.name, err)
	}
	klog.FromContext(ctx).Info("Created the Lease", "ownerReference", len(created.OwnerReferences) > 0, "held", want.hold)
	r.lease = created
	r.countRelease(want)
	return nil
}

func (r *Renewer) countRelease(want target) {
	if !want.hold {
		r.m.Released(want.reason)
	}
}

func holderOf(l *coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// mutate makes lease say what want asks, with this Renewer's labels.
func (r *Renewer) mutate(lease *coordinationv1.Lease, want target) {
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	for k, v := range nodev1alpha1.LeaseLabels(r.opts.Extension, r.opts.NodeName) {
		lease.Labels[k] = v
	}
	// The registration labels follow the configuration: turning register off
	// removes the label, and with it the controller's "lease" entry.
	if r.opts.Register {
		lease.Labels[nodev1alpha1.RegisterLabel] = "true"
	} else {
		delete(lease.Labels, nodev1alpha1.RegisterLabel)
	}
	if r.opts.Register && r.opts.AffectsReadiness != nil && !*r.opts.AffectsReadiness {
		lease.Labels[nodev1alpha1.AffectsReadinessLabel] = "false"
	} else {
		delete(lease.Labels, nodev1alpha1.AffectsReadinessLabel)
	}
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(r.opts.LeaseDuration.Seconds()))

	if !want.hold {
		// Released: an empty holder. renewTime keeps the last real renewal,
		// which is what a person looking at the Lease wants to know.
		lease.Spec.HolderIdentity = ptr.To("")
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[nodev1alpha1.ReasonAnnotation] = want.reason
		lease.Annotations[nodev1alpha1.MessageAnnotation] = truncate(want.message, maxMessageLength)
		return
	}
	now := metav1.NewMicroTime(r.opts.Clock.Now())
	if holderOf(lease) != r.opts.Holder {
		// Acquired (created, re-acquired after a release, or taken over).
		if lease.ResourceVersion != "" {
			lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
		lease.Spec.AcquireTime = &now
	}
	lease.Spec.HolderIdentity = ptr.To(r.opts.Holder)
	lease.Spec.RenewTime = &now
	delete(lease.Annotations, nodev1alpha1.ReasonAnnotation)
	delete(lease.Annotations, nodev1alpha1.MessageAnnotation)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// ensureOwner adds the ownerReference to the Node when the Lease has none and
// the Node's UID can be found, so that deleting the Node garbage-collects the
// Lease.
func (r *Renewer) ensureOwner(ctx context.Context, lease *coordinationv1.Lease) {
	for _, ref := range lease.OwnerReferences {
		if ref.Kind == "Node" && ref.APIVersion == "v1" {
			return
		}
	}
	if !r.owner.resolved {
		r.resolveOwner(ctx)
	}
	if r.owner.uid == "" {
		return
	}
	// No blockOwnerDeletion: setting it needs permission to update the
	// Node's finalizers, which an extension must not have.
	lease.OwnerReferences = append(lease.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       r.opts.NodeName,
		UID:        r.owner.uid,
	})
}

// resolveOwner finds the Node's UID: from Options.NodeUID, from a
// SelfSubjectReview (a pod-bound token carries the node's name and UID, and
// reviewing oneself needs no permission beyond the default), or from the Node
// itself when the caller may read it.
func (r *Renewer) resolveOwner(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if r.opts.NodeUID != "" {
		r.owner = ownerState{resolved: true, uid: r.opts.NodeUID}
		return
	}
	var why []string
	definite := true
	user, err := r.client.ReviewSelf(ctx)
	switch {
	case err != nil:
		why = append(why, fmt.Sprintf("SelfSubjectReview failed: %v", err))
		definite = definite && isDefinite(err)
	default:
		extra := user.Extra
		names, uids := extra[extraNodeName], extra[extraNodeUID]
		switch {
		case len(names) == 0 || len(uids) == 0:
			why = append(why, fmt.Sprintf("the credentials of %q carry no node (not a pod-bound service-account token)", user.Username))
		case names[0] != r.opts.NodeName:
			why = append(why, fmt.Sprintf("the credentials are bound to node %q, not %q", names[0], r.opts.NodeName))
		default:
			r.owner = ownerState{resolved: true, uid: types.UID(uids[0])}
			logger.V(2).Info("Found the node's UID in a SelfSubjectReview", "uid", uids[0])
			return
		}
	}
	uid, err := r.client.NodeUID(ctx, r.opts.NodeName)
	if err == nil {
		r.owner = ownerState{resolved: true, uid: uid}
		logger.V(2).Info("Found the node's UID by reading the Node", "uid", uid)
		return
	}
	why = append(why, fmt.Sprintf("reading Node %s failed: %v", r.opts.NodeName, err))
	definite = definite && isDefinite(err)
	r.owner.resolved = definite
	if r.owner.warned {
		logger.V(2).Info("Node UID still unknown", "why", strings.Join(why, "; "))
		return
	}
	r.owner.warned = true
	logger.Info("Writing the Lease without an ownerReference to its Node: it will not be garbage-collected with the Node",
		"why", strings.Join(why, "; "), "willRetry", !definite)
}

// isDefinite reports whether an error is an answer ("no") rather than a
// failure to get one.
func isDefinite(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsUnauthorized(err)
}
