package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/pkg/nodeutil"
)

// FieldManager names the plugin's writes in managedFields.
const FieldManager = "kubectl-nodehealth"

// conflictBackoff bounds the read-modify-write loop. A conflict means another
// writer (the controller, a second register) changed the Node between our
// GET and our patch; a fresh GET resolves it, so attempts follow each other
// quickly, with jitter so that two racing clients fall out of step.
var conflictBackoff = wait.Backoff{
	Steps:    10,
	Duration: 20 * time.Millisecond,
	Factor:   1.5,
	Jitter:   1.0,
	Cap:      time.Second,
}

// ErrRefused is wrapped by every error that refuses an edit (an entry owned
// by the controller, a list that cannot be parsed), as opposed to API errors.
var ErrRefused = errors.New("refused")

// editFunc changes a node's decoded list. It returns the new list, whether it
// differs, and a message saying what happened.
type editFunc func(node string, list []nodev1alpha1.SystemExtension) (next []nodev1alpha1.SystemExtension, changed bool, msg string, err error)

// editList is the resourceVersion-guarded read-modify-write of a node's
// extension list through nodeutil.PatchNode: GET the Node, decode the
// annotation with the shared codec, apply edit, encode, and send a JSON merge
// patch that carries the resourceVersion read. If anybody wrote the Node in
// between, the API server answers 409 Conflict and the edit starts over from
// a fresh GET, so concurrent writers never lose each other's entries.
func editList(ctx context.Context, client kubernetes.Interface, node, leaseNamespace string, edit editFunc) (string, error) {
	var msg string
	_, _, err := nodeutil.PatchNode(ctx, client.CoreV1().Nodes(), node,
		nodeutil.PatchOptions{FieldManager: FieldManager, Backoff: conflictBackoff}, func(n *corev1.Node) error {
			value := n.Annotations[nodev1alpha1.SystemExtensionsAnnotation]
			list, err := nodev1alpha1.DecodeSystemExtensions(value, leaseNamespace)
			if err != nil {
				// Never rewrite what cannot be parsed: entries in it may
				// belong to someone, and only a person can tell which.
				return fmt.Errorf("%w: node %s: %v; refusing to rewrite an annotation that cannot be parsed: fix it, or remove it with `kubectl annotate node %s %s-`",
					ErrRefused, node, err, node, nodev1alpha1.SystemExtensionsAnnotation)
			}
			next, changed, m, err := edit(node, list)
			if err != nil {
				return err
			}
			msg = m
			if !changed {
				return nil
			}
			return setList(n, next, leaseNamespace)
		})
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("updating the extension list: %w", err)
	}
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("node %s not found", node)
	}
	return msg, err
}

// setList sets the annotation to the encoded list, removing it when the list
// is empty.
func setList(n *corev1.Node, list []nodev1alpha1.SystemExtension, leaseNamespace string) error {
	if len(list) == 0 {
		delete(n.Annotations, nodev1alpha1.SystemExtensionsAnnotation)
		return nil
	}
	encoded, err := nodev1alpha1.EncodeSystemExtensions(list, n.Name, leaseNamespace)
	if err != nil {
		return err
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[nodev1alpha1.SystemExtensionsAnnotation] = encoded
	return nil
}

// RegisterOptions describe the entry `register` writes.
type RegisterOptions struct {
	Extension string
	// Lease is "NAMESPACE/NAME" or "NAME" (in the Lease namespace); empty
	// means the default <extension>.<node>.
	Lease            string
	AffectsReadiness bool
	Force            bool
}

// parseLease turns --lease into a reference; the codec checks the rest
// (namespace equal to the Lease namespace, a valid name).
func parseLease(value, leaseNamespace string) *nodev1alpha1.LeaseReference {
	if value == "" {
		return nil
	}
	if ns, name, ok := strings.Cut(value, "/"); ok {
		return &nodev1alpha1.LeaseReference{Namespace: ns, Name: name}
	}
	return &nodev1alpha1.LeaseReference{Namespace: leaseNamespace, Name: value}
}

// registerEdit adds or updates a manual entry.
func registerEdit(o RegisterOptions, leaseNamespace string) editFunc {
	return func(node string, list []nodev1alpha1.SystemExtension) ([]nodev1alpha1.SystemExtension, bool, string, error) {
		want := nodev1alpha1.SystemExtension{Name: o.Extension, Lease: parseLease(o.Lease, leaseNamespace)}
		if !o.AffectsReadiness {
			f := false
			want.AffectsReadiness = &f
		}
		next := make([]nodev1alpha1.SystemExtension, 0, len(list)+1)
		found := -1
		for i, e := range list {
			if e.Name == o.Extension {
				found = i
			}
			next = append(next, e)
		}
		prefix := fmt.Sprintf("node/%s: extension %q", node, o.Extension)
		var msg string
		switch {
		case found < 0:
			next = append(next, want)
			msg = prefix + " registered"
		case next[found].Source != nodev1alpha1.SourceManual && !o.Force:
			return nil, false, "", fmt.Errorf("%w: %s is %s; use --force to replace it with a manual entry", ErrRefused, prefix, managedBy(next[found], node, leaseNamespace))
		case next[found].Source != nodev1alpha1.SourceManual:
			msg = fmt.Sprintf("%s registered by hand, replacing the entry %s (a manual entry wins over the controller's)",
				prefix, managedBy(next[found], node, leaseNamespace))
			next[found] = want
		case sameEntry(next[found], want, node, leaseNamespace):
			return list, false, prefix + " already registered (no change)", nil
		default:
			next[found] = want
			msg = prefix + " updated"
		}
		if errs := nodev1alpha1.ValidateSystemExtensions(next, leaseNamespace); len(errs) > 0 {
			return nil, false, "", fmt.Errorf("%s: %w", prefix, errs.ToAggregate())
		}
		return next, true, msg, nil
	}
}

// unregisterEdit removes an entry.
func unregisterEdit(extension string, force bool, leaseNamespace string) editFunc {
	return func(node string, list []nodev1alpha1.SystemExtension) ([]nodev1alpha1.SystemExtension, bool, string, error) {
		prefix := fmt.Sprintf("node/%s: extension %q", node, extension)
		next := make([]nodev1alpha1.SystemExtension, 0, len(list))
		var removed *nodev1alpha1.SystemExtension
		for i := range list {
			if list[i].Name == extension {
				removed = &list[i]
				continue
			}
			next = append(next, list[i])
		}
		switch {
		case removed == nil:
			return list, false, prefix + " not registered (no change)", nil
		case removed.Source != nodev1alpha1.SourceManual && !force:
			return nil, false, "", fmt.Errorf("%w: %s is %s, and the controller would add it back; %s, or use --force",
				ErrRefused, prefix, managedBy(*removed, node, leaseNamespace), howToStop(*removed, node, leaseNamespace))
		case removed.Source != nodev1alpha1.SourceManual:
			return next, true, fmt.Sprintf("%s unregistered; it was %s, and the controller adds it back unless you %s",
				prefix, managedBy(*removed, node, leaseNamespace), howToStop(*removed, node, leaseNamespace)), nil
		}
		return next, true, prefix + " unregistered", nil
	}
}

func managedBy(e nodev1alpha1.SystemExtension, node, leaseNamespace string) string {
	if rule, ok := nodev1alpha1.RuleFromSource(e.Source); ok {
		return fmt.Sprintf("managed by the controller's rule %q (source %s)", rule, e.Source)
	}
	return fmt.Sprintf("self-registered by its Lease %s (source %s)", e.LeaseFor(node, leaseNamespace), e.Source)
}

func howToStop(e nodev1alpha1.SystemExtension, node, leaseNamespace string) string {
	if rule, ok := nodev1alpha1.RuleFromSource(e.Source); ok {
		return fmt.Sprintf("change rule %q in the controller's configuration or the node's labels", rule)
	}
	return fmt.Sprintf("delete the Lease %s or remove its label %s", e.LeaseFor(node, leaseNamespace), nodev1alpha1.RegisterLabel)
}

func sameEntry(a, b nodev1alpha1.SystemExtension, node, leaseNamespace string) bool {
	na := nodev1alpha1.NormalizeSystemExtensions([]nodev1alpha1.SystemExtension{a}, node, leaseNamespace)[0]
	nb := nodev1alpha1.NormalizeSystemExtensions([]nodev1alpha1.SystemExtension{b}, node, leaseNamespace)[0]
	if na.Name != nb.Name || na.Source != nb.Source || na.ReadinessAffected() != nb.ReadinessAffected() {
		return false
	}
	if (na.Lease == nil) != (nb.Lease == nil) {
		return false
	}
	return na.Lease == nil || *na.Lease == *nb.Lease
}
