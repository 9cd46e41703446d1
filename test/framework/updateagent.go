package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	versioned "nodehealth.io/client-go/clientset/versioned"
)

// UpdateAgentPolicy is the ValidatingAdmissionPolicy of deploy/update-agent
// that keeps each agent's pod-bound token to its own shadow's status.
const UpdateAgentPolicy = "nodehealth-update-agent-own-shadow"

// ShadowDeletePolicy is the ValidatingAdmissionPolicy of deploy/update-agent
// that refuses a person's deletion of a shadow mid-update or while its failed
// update halts the rollout.
const ShadowDeletePolicy = "nodehealth-shadow-delete-mid-update"

// Kubectl runs the control plane's kubectl as the admin from the repository
// root (so manifest paths are relative to it), with no ~/.kube of the
// developer's, and returns its combined output.
func (e *Environment) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "kubectl-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, e.Binary(Kubectl), append([]string{"--kubeconfig=" + e.Kubeconfig}, args...)...)
	cmd.Dir = root
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.Bytes(), nil
}

// InstallUpdateAgent applies what a user applies for the update agents: the
// namespaces and extension security of deploy/controller and
// deploy/extensions, then deploy/update-agent as it is (kwok runs the
// DaemonSet's pods, whose bound tokens SimNodes give their agents). It
// returns once its admission policies (the own-shadow one and the one
// refusing a shadow's deletion mid-update) are type-checked, without
// warnings, so the agents' status writes and users' deletions go through
// them.
func (e *Environment) InstallUpdateAgent(ctx context.Context) error {
	for _, args := range [][]string{
		{"apply", "--server-side", "-f", "deploy/controller/namespaces.yaml", "-f", "deploy/controller/rbac.yaml"},
		{"apply", "--server-side", "-k", "deploy/extensions/"},
		{"apply", "--server-side", "-k", "deploy/update-agent/"},
	} {
		if _, err := e.Kubectl(ctx, args...); err != nil {
			return err
		}
	}
	policies := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	for _, name := range []string{UpdateAgentPolicy, ShadowDeletePolicy} {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := policies.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, nil
			}
			if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
				return false, fmt.Errorf("policy %s has type-checking warnings: %+v", name, w)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// RemoveShadow deletes a test's shadow the way a person is told to: a failure
// that halts the rollout is resumed first, since ShadowDeletePolicy refuses
// the deletion of a halting shadow, and a cleanup that ignored the refusal
// would leave the halt to the next test against the same API server. A shadow
// that is already gone is not an error.
func RemoveShadow(ctx context.Context, c versioned.Interface, name string) error {
	shadows := c.UpdatesV1alpha1().BottlerocketShadows()
	sh, err := shadows.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if updatesv1alpha1.Halting(sh.Annotations) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, updatesv1alpha1.ResumeAnnotation, sh.Annotations[updatesv1alpha1.FailedAnnotation])
		if _, err := shadows.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("resuming shadow %s before deleting it: %w", name, err)
		}
	}
	if err := shadows.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting shadow %s: %w", name, err)
	}
	return nil
}
