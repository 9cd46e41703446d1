package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The rendered controller manifests say what the controller and the docs rely
// on: the readiness taint is tolerated, probes and ports match the served
// addresses, the configuration is mounted where --config points, and the pod
// is locked down.
func TestControllerManifestsShape(t *testing.T) {
	objs := render(t, "deploy/")

	for _, ns := range []string{systemNamespace, leaseNamespace} {
		find[*corev1.Namespace](t, objs, ns)
	}
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetNamespace() != "" &&
			!slices.Contains([]string{systemNamespace, leaseNamespace, metav1.NamespaceDefault}, m.GetNamespace()) {
			t.Errorf("%T %s is in namespace %s", o, m.GetName(), m.GetNamespace())
		}
	}

	deploy := find[*appsv1.Deployment](t, objs, controllerName)
	if deploy.Namespace != systemNamespace {
		t.Errorf("Deployment namespace %q", deploy.Namespace)
	}
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", deploy.Spec.Replicas)
	}
	selector, err := metav1.LabelSelectorAsSelector(deploy.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	pod := deploy.Spec.Template.Spec
	if !selector.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("Deployment selector %s does not match its pod labels %v", selector, deploy.Spec.Template.Labels)
	}
	if pod.ServiceAccountName != controllerName {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	pc := find[*schedulingv1.PriorityClass](t, objs, priorityClass)
	if pod.PriorityClassName != pc.Name || pc.Value <= 0 || pc.Value >= 2000000000 || pc.GlobalDefault {
		t.Errorf("priority class %q (value %d, globalDefault %v): want %s, high but below system-cluster-critical",
			pod.PriorityClassName, pc.Value, pc.GlobalDefault, priorityClass)
	}

	// Tolerations: the readiness taint with either effect (also with a value,
	// as Bottlerocket's node-taints setting writes it), and dead nodes for a
	// bounded time.
	logger := klog.Background()
	for _, taint := range []corev1.Taint{
		{Key: taintKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: taintKey, Effect: corev1.TaintEffectNoExecute},
		{Key: taintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	} {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(logger, &taint, false) }) {
			t.Errorf("the controller does not tolerate %s", taint.ToString())
		}
	}
	for _, tol := range pod.Tolerations {
		if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
			t.Errorf("toleration %+v tolerates every taint", tol)
		}
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil ||
		!slices.ContainsFunc(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(w corev1.WeightedPodAffinityTerm) bool {
			s, err := metav1.LabelSelectorAsSelector(w.PodAffinityTerm.LabelSelector)
			return err == nil && w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && s.Matches(labels.Set(deploy.Spec.Template.Labels))
		}) {
		t.Errorf("no pod anti-affinity across nodes: %+v", pod.Affinity)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "ghcr.io/nodehealth/nodehealth-controller:v0.1.0" {
		t.Errorf("image %q, want the project's ghcr.io/nodehealth/nodehealth-controller:v0.1.0", c.Image)
	}
	if !slices.Contains(c.Args, "--config="+configMountPath+"/"+configFileName) {
		t.Errorf("args %q do not point --config at the mounted file", c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("container ports %v, want metrics 8080 and health 8081 (the configuration's defaults)", ports)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("health") {
			t.Errorf("%s probe %+v, want GET %s on port health", name, p, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	if c.Resources.Requests.Cpu().Cmp(resource.MustParse("50m")) != 0 || c.Resources.Requests.Memory().Cmp(resource.MustParse("64Mi")) != 0 {
		t.Errorf("requests %v, want cpu 50m, memory 64Mi", c.Resources.Requests)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory limit")
	}
	// The Go runtime's soft memory limit follows the container's limit, in
	// bytes (a plain number is bytes to Go), and the GC runs at GOGC=50
	// (docs/scale.md).
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env["GOMEMLIMIT"].ValueFrom; ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" ||
		ref.ResourceFieldRef.Divisor.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("GOMEMLIMIT %+v, want the container's limits.memory in bytes", env["GOMEMLIMIT"])
	}
	if env["GOGC"].Value != "50" {
		t.Errorf("GOGC %q, want 50", env["GOGC"].Value)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container securityContext %+v: want read-only root, no privilege escalation, drop ALL", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v: want runAsNonRoot", psc)
	}

	// The configuration: a ConfigMap volume mounted as a folder (a subPath
	// mount would never see an edit), holding config.yaml.
	cm := find[*corev1.ConfigMap](t, objs, configMapName)
	if _, ok := cm.Data[configFileName]; !ok || cm.Namespace != systemNamespace {
		t.Errorf("ConfigMap %s/%s has keys %v, want %s", cm.Namespace, cm.Name, slices.Collect(maps.Keys(cm.Data)), configFileName)
	}
	var volume string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			volume = v.Name
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == volume && m.MountPath == configMountPath && m.SubPath == "" && m.ReadOnly
	}) {
		t.Errorf("ConfigMap %s is not mounted read-only at %s: volumes %+v, mounts %+v", cm.Name, configMountPath, pod.Volumes, c.VolumeMounts)
	}

	pdb := find[*policyv1.PodDisruptionBudget](t, objs, controllerName)
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", pdb.Spec)
	}
	if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !s.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pods", pdb.Spec.Selector)
	}
	svc := find[*corev1.Service](t, objs, "nodehealth-controller-metrics")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(deploy.Spec.Template.Labels)) ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
		t.Errorf("metrics Service %+v does not serve the pods' metrics port", svc.Spec)
	}
}

// The configuration embedded in the ConfigMap is accepted by the binary as it
// is, and agrees with the rest of the manifests: the leader-election Lease the
// RBAC grants, the extension namespace, the served ports and the taint.
func TestControllerConfigIsAccepted(t *testing.T) {
	objs := render(t, "deploy/")
	cm := find[*corev1.ConfigMap](t, objs, configMapName)
	path := filepath.Join(t.TempDir(), configFileName)
	if err := os.WriteFile(path, []byte(cm.Data[configFileName]), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(testenv.Context(t), testenv.Binary(t, "nodehealth-controller"), "--config", path, "--write-config-to", "-")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nodehealth-controller --config: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "note:") || strings.Contains(stderr.String(), "error:") {
		t.Fatalf("the ConfigMap's configuration does not start as is:\n%s", stderr.String())
	}

	var effective struct {
		LeaderElection struct {
			LeaderElect       bool   `json:"leaderElect"`
			ResourceLock      string `json:"resourceLock"`
			ResourceName      string `json:"resourceName"`
			ResourceNamespace string `json:"resourceNamespace"`
		} `json:"leaderElection"`
		ClientConnection struct {
			Kubeconfig string `json:"kubeconfig"`
		} `json:"clientConnection"`
		Serving struct {
			MetricsBindAddress string `json:"metricsBindAddress"`
			HealthzBindAddress string `json:"healthzBindAddress"`
		} `json:"serving"`
		LeaseNamespace string `json:"leaseNamespace"`
		Taint          struct {
			Key    string `json:"key"`
			Effect string `json:"effect"`
		} `json:"taint"`
		ExtensionRules []struct {
			Name string `json:"name"`
		} `json:"extensionRules"`
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stdout.String()), 4096).Decode(&effective); err != nil {
		t.Fatalf("decoding the effective configuration: %v\n%s", err, stdout.String())
	}
	le := effective.LeaderElection
	if !le.LeaderElect || le.ResourceLock != "leases" || le.ResourceNamespace != systemNamespace || le.ResourceName != controllerName {
		t.Errorf("leader election %+v: want a Lease %s/%s, which the RBAC grants", le, systemNamespace, controllerName)
	}
	leRole := find[*rbacv1.Role](t, objs, "nodehealth-controller-leader-election")
	if leRole.Namespace != le.ResourceNamespace || !slices.ContainsFunc(leRole.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.ResourceNames, le.ResourceName) && slices.Contains(r.Verbs, "update")
	}) {
		t.Errorf("the leader-election Role %s/%s does not grant the configured Lease %s/%s", leRole.Namespace, leRole.Name, le.ResourceNamespace, le.ResourceName)
	}
	if effective.ClientConnection.Kubeconfig != "" {
		t.Errorf("kubeconfig %q: in a pod the in-cluster configuration must be used", effective.ClientConnection.Kubeconfig)
	}
	if effective.LeaseNamespace != leaseNamespace {
		t.Errorf("leaseNamespace %q, want %s", effective.LeaseNamespace, leaseNamespace)
	}
	if effective.Serving.MetricsBindAddress != "0.0.0.0:8080" || effective.Serving.HealthzBindAddress != "0.0.0.0:8081" {
		t.Errorf("serving %+v, want :8080 and :8081 as the Deployment's ports and probes expect", effective.Serving)
	}
	if effective.Taint.Key != taintKey || effective.Taint.Effect != string(corev1.TaintEffectNoSchedule) {
		t.Errorf("taint %+v, want %s:NoSchedule as the tolerations and the admission policy expect", effective.Taint, taintKey)
	}
	// A first install changes nothing on any node: no rule, so no node
	// requires an extension (TestDeployInstallsTheControllerWithExactlyItsPermissionsAndUninstallsAsDocumented checks no Node is written).
	if len(effective.ExtensionRules) != 0 {
		t.Errorf("%d extension rules, want none: a rule gates every node it selects until its extension renews", len(effective.ExtensionRules))
	}
}

// TestDeployInstallsTheControllerWithExactlyItsPermissionsAndUninstallsAsDocumented applies deploy/ the documented way and checks what
// only a real API server can tell: the objects are accepted (strict
// server-side field validation, Pod Security "restricted", priority admission),
// the ServiceAccount has exactly the permissions the controller uses, the
// pods schedule onto gated nodes, and the documented uninstall steps work.
func TestDeployInstallsTheControllerWithExactlyItsPermissionsAndUninstallsAsDocumented(t *testing.T) {
	env := testenv.Env(t)
	ctx := testenv.ContextWithTimeout(t, 8*time.Minute)

	// Two simulated nodes that are gated: only pods tolerating the readiness
	// taint can run on them.
	nodes := []string{"deploy-gated-a", "deploy-gated-b"}
	for i, name := range nodes {
		node := framework.NewKwokNode(name, map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i)})
		node.Spec.Taints = []corev1.Taint{{Key: taintKey, Effect: corev1.TaintEffectNoSchedule}}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.DeleteNode(context.Background(), name) })
	}

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _, _ = kubectl(t, ctx, "delete", "-k", "deploy/", "--ignore-not-found", "--wait=false")
	})
	// The documented install command; a second apply is a no-op.
	mustKubectl(t, ctx, "apply", "--server-side", "-k", "deploy/")
	mustKubectl(t, ctx, "apply", "--server-side", "-k", "deploy/")

	t.Run("RBAC is exactly what the controller uses", func(t *testing.T) { testExactRules(t, ctx) })
	t.Run("access reviews", func(t *testing.T) { testAccessReviews(t, ctx) })
	t.Run("kubectl auth can-i", func(t *testing.T) {
		if out := mustKubectl(t, ctx, "auth", "can-i", "patch", "nodes", "--as="+serviceAccount); strings.TrimSpace(out) != "yes" {
			t.Errorf("can-i patch nodes: %q", out)
		}
		out, _, err := kubectl(t, ctx, "auth", "can-i", "delete", "nodes", "--as="+serviceAccount)
		if err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("can-i delete nodes: %q, %v; want no", out, err)
		}
	})

	t.Run("pods run on gated nodes, spread, with priority", func(t *testing.T) {
		var pods []corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := env.Client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + controllerName})
			if err != nil {
				return false, err
			}
			pods = list.Items
			onNodes := sets.New[string]()
			for _, p := range pods {
				if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					onNodes.Insert(p.Spec.NodeName)
				}
			}
			return onNodes.Len() == 2, nil
		})
		if err != nil {
			t.Fatalf("two controller pods did not run on two nodes: %v\n%s", err, describePods(pods))
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
				t.Errorf("pod %s ran on %s, not on a gated node", p.Name, p.Spec.NodeName)
			}
			if p.Spec.Priority == nil || *p.Spec.Priority != 1000000000 {
				t.Errorf("pod %s priority %v, want %s's 1000000000", p.Name, p.Spec.Priority, priorityClass)
			}
		}
		_, err = framework.WaitFor(ctx, framework.NamedListWatch(env.Client.PolicyV1().RESTClient(), "poddisruptionbudgets", systemNamespace, controllerName),
			func(pdb *policyv1.PodDisruptionBudget) bool {
				return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 2 && pdb.Status.DisruptionsAllowed == 1
			})
		if err != nil {
			t.Errorf("PodDisruptionBudget: %v", err)
		}
	})

	t.Run("the controller runs with exactly this RBAC", func(t *testing.T) { testRunsAsServiceAccount(t, ctx, nodes) })

	t.Run("the uninstall Job's command with its ServiceAccount", func(t *testing.T) { testUninstallJob(t, ctx, nodes) })

	t.Run("documented uninstall steps", func(t *testing.T) {
		// The commands of docs/controller.md, "Uninstall", in order. The
		// policy's kind exists only where the API server serves it (v1.36+;
		// not on the v1.30 of make test-compat), and only there can it have
		// been installed: the docs say to skip the step elsewhere.
		served, err := env.ServesResource(ctx, "admissionregistration.k8s.io/v1", "mutatingadmissionpolicies")
		if err != nil {
			t.Fatal(err)
		}
		if served {
			mustKubectl(t, ctx, "delete", "-k", policyDir, "--ignore-not-found")
		} else {
			t.Logf("mutatingadmissionpolicies not served: skipping the step that deletes the MutatingAdmissionPolicy")
		}
		mustKubectl(t, ctx, "-n", systemNamespace, "scale", "deploy/"+controllerName, "--replicas=0")
		_, err = framework.WaitFor(ctx, framework.NamedListWatch(env.Client.AppsV1().RESTClient(), "deployments", systemNamespace, controllerName),
			func(d *appsv1.Deployment) bool {
				return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 0
			})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, testenv.Binary(t, "nodehealth-controller"), "uninstall", "--kubeconfig", env.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nodehealth-controller uninstall: %v\n%s", err, out)
		}
		for _, name := range nodes {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintKey }) {
				t.Errorf("node %s keeps the readiness taint after uninstall: %v", name, n.Spec.Taints)
			}
		}
		mustKubectl(t, ctx, "delete", "-k", "deploy/")
		if _, err := env.Client.SchedulingV1().PriorityClasses().Get(ctx, priorityClass, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("PriorityClass after delete: %v", err)
		}
	})
}

// testUninstallJob applies deploy/uninstall as documented, but its Job
// (kwok runs no container) is run here: the Job's arguments, with the
// binary built from this tree and a token of the Job's ServiceAccount. It
// scales the controller to 0, waits for its pods to go, and leaves no taint,
// annotation or condition of the controller on any node.
func testUninstallJob(t *testing.T, ctx context.Context, nodes []string) {
	env := testenv.Env(t)
	objs := render(t, "deploy/uninstall/")
	job := find[*batchv1.Job](t, objs, "nodehealth-uninstall")
	spec := job.Spec.Template.Spec
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == taintKey }) {
		t.Errorf("the Job does not tolerate %s: it could not run while every node is gated", taintKey)
	}
	// Everything but the Job, applied as documented; the Job validated by
	// the API server.
	out := mustKubectl(t, ctx, "kustomize", "deploy/uninstall/")
	var docs []string
	for _, doc := range strings.Split(out, "\n---\n") {
		if !strings.Contains(doc, "kind: Job\n") {
			docs = append(docs, doc)
		}
	}
	manifest := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, ctx, "apply", "--server-side", "-f", manifest)
	t.Cleanup(func() { _, _, _ = kubectl(t, context.Background(), "delete", "-f", manifest, "--ignore-not-found") })
	mustKubectl(t, ctx, "apply", "--server-side", "--dry-run=server", "-k", "deploy/uninstall/")

	sa, err := env.ClientForServiceAccount(ctx, systemNamespace, spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err = clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: env.APIServerURL, CertificateAuthority: env.CAFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"sa": {Token: sa.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"sa": {Cluster: "local", AuthInfo: "sa"}},
		CurrentContext: "sa",
	}, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// A node as the controller leaves it: tainted, listed, with its condition.
	node := nodes[len(nodes)-1]
	n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if framework.ReadinessTaints(n, "") == 0 {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoSchedule})
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	args := append(slices.Clone(spec.Containers[0].Args), "--kubeconfig", kubeconfig)
	cmdOut, err := exec.CommandContext(ctx, testenv.Binary(t, "nodehealth-controller"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("the Job's command %v: %v\n%s", args, err, cmdOut)
	}
	t.Logf("the Job's command %v:\n%s", args, cmdOut)
	d, err := env.Client.AppsV1().Deployments(systemNamespace).Get(ctx, controllerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Errorf("the controller's Deployment has %v replicas after the Job, want 0", d.Spec.Replicas)
	}
	for _, name := range nodes {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if framework.ReadinessTaints(n, "") != 0 || framework.ExtensionsReady(n) != "" || n.Annotations["nodehealth.io/system-extensions"] != "" {
			t.Errorf("node %s after the Job: taints %v, condition %q, extensions %q", name, n.Spec.Taints, framework.ExtensionsReady(n), n.Annotations["nodehealth.io/system-extensions"])
		}
	}
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "  %s node=%q phase=%s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(&b, " %s: %s", c.Type, c.Message)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// rule is one permission: API group, resource (with subresource), verb and
// resource name ("" for any).
type rule struct{ group, resource, verb, name string }

func (r rule) String() string {
	s := r.verb + " " + r.resource
	if r.group != "" {
		s += "." + r.group
	}
	if r.name != "" {
		s += "/" + r.name
	}
	return s
}

// rulesIn lists what user may do in namespace (cluster-wide rules included),
// as the API server's own SelfSubjectRulesReview reports it.
func rulesIn(t *testing.T, ctx context.Context, username, namespace string) sets.Set[rule] {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Env(t).Config)
	saNamespace := strings.Split(username, ":")[2]
	cfg.Impersonate = rest.ImpersonationConfig{UserName: username, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := sets.New[rule]()
	for _, r := range review.Status.ResourceRules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out.Insert(rule{g, res, v, n})
					}
				}
			}
		}
	}
	return out
}

// The ServiceAccount's permissions, minus what every authenticated
// ServiceAccount has, are exactly the listed ones in every namespace that
// matters: one extra verb, resource or namespace fails this test.
func testExactRules(t *testing.T, ctx context.Context) {
	cluster := []rule{
		{"", "nodes", "get", ""}, {"", "nodes", "list", ""}, {"", "nodes", "watch", ""}, {"", "nodes", "patch", ""},
		{"", "nodes/status", "patch", ""},
		{"", "pods", "list", ""},
		{"", "pods/eviction", "create", ""},
		// The reviews of serving.metricsAuthentication Delegated.
		{"authentication.k8s.io", "tokenreviews", "create", ""}, {"authorization.k8s.io", "subjectaccessreviews", "create", ""},
	}
	const lease = "coordination.k8s.io"
	want := map[string][]rule{
		systemNamespace: {{lease, "leases", "create", ""}, {lease, "leases", "get", controllerName}, {lease, "leases", "update", controllerName}},
		leaseNamespace: {{lease, "leases", "get", ""}, {lease, "leases", "list", ""}, {lease, "leases", "watch", ""},
			{lease, "leases", "create", ""}, {lease, "leases", "update", canaryLease},
			// The virtual permission deploy/extensions/policy.yaml recognises the controller by.
			{"nodehealth.io", "canaryleases", "renew", ""}},
		metav1.NamespaceDefault: {{"", "events", "create", ""}, {"", "events", "patch", ""}},
		metav1.NamespaceSystem:  nil,
		"kube-node-lease":       nil,
	}
	baselineUser := "system:serviceaccount:" + systemNamespace + ":rbac-baseline"
	for ns, extra := range want {
		got := rulesIn(t, ctx, serviceAccount, ns).Difference(rulesIn(t, ctx, baselineUser, ns))
		expected := sets.New(cluster...).Insert(extra...)
		if !got.Equal(expected) {
			t.Errorf("namespace %s:\n  granted but not needed: %v\n  needed but not granted: %v",
				ns, sortedRules(got.Difference(expected)), sortedRules(expected.Difference(got)))
		}
	}
}

func sortedRules(s sets.Set[rule]) []string {
	out := make([]string, 0, s.Len())
	for r := range s {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

// Spot checks through SubjectAccessReviews, the way the authorizer answers the
// controller's real requests.
func testAccessReviews(t *testing.T, ctx context.Context) {
	client := testenv.Env(t).Client
	type check struct {
		verb, group, resource, sub, namespace, name string
		allowed                                     bool
	}
	const lease = "coordination.k8s.io"
	checks := []check{
		// What the controller does.
		{"watch", "", "nodes", "", "", "", true},
		{"patch", "", "nodes", "", "", "node-1", true},
		{"patch", "", "nodes", "status", "", "node-1", true},
		{"list", "", "pods", "", "", "", true},
		{"create", "", "pods", "eviction", "team-a", "web-1", true},
		{"watch", lease, "leases", "", leaseNamespace, "", true},
		{"create", lease, "leases", "", leaseNamespace, canaryLease, true},
		{"update", lease, "leases", "", leaseNamespace, canaryLease, true},
		{"get", lease, "leases", "", systemNamespace, controllerName, true},
		{"update", lease, "leases", "", systemNamespace, controllerName, true},
		{"create", "", "events", "", metav1.NamespaceDefault, "", true},
		{"patch", "", "events", "", metav1.NamespaceDefault, "", true},
		// What it must not do.
		{"update", "", "nodes", "", "", "node-1", false},
		{"delete", "", "nodes", "", "", "node-1", false},
		{"create", "", "nodes", "", "", "", false},
		{"update", "", "nodes", "status", "", "node-1", false},
		{"get", "", "secrets", "", systemNamespace, "", false},
		{"list", "", "secrets", "", "", "", false},
		{"get", "", "configmaps", "", systemNamespace, configMapName, false},
		{"delete", "", "pods", "", "team-a", "web-1", false},
		{"get", "", "pods", "", "team-a", "web-1", false},
		{"create", "", "pods", "", systemNamespace, "", false},
		{"update", lease, "leases", "", leaseNamespace, "kube-proxy.node-1", false},
		{"patch", lease, "leases", "", leaseNamespace, "kube-proxy.node-1", false},
		{"delete", lease, "leases", "", leaseNamespace, "kube-proxy.node-1", false},
		{"update", lease, "leases", "", systemNamespace, "other-leader", false},
		{"list", lease, "leases", "", systemNamespace, "", false},
		{"get", lease, "leases", "", "kube-node-lease", "node-1", false},
		{"update", lease, "leases", "", "kube-node-lease", "node-1", false},
		{"create", lease, "leases", "", metav1.NamespaceSystem, "", false},
		{"create", "", "events", "", metav1.NamespaceSystem, "", false},
		{"create", "events.k8s.io", "events", "", metav1.NamespaceDefault, "", false},
		{"create", "", "serviceaccounts", "token", systemNamespace, controllerName, false},
		{"impersonate", "", "users", "", "", "", false},
		{"update", "apps", "deployments", "", systemNamespace, controllerName, false},
	}
	for _, c := range checks {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceAccount,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Namespace: c.namespace, Name: c.name,
			},
		}}
		res, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != c.allowed {
			what := c.resource
			if c.sub != "" {
				what += "/" + c.sub
			}
			t.Errorf("%s %s %q in namespace %q (group %q): allowed=%v, want %v", c.verb, what, c.name, c.namespace, c.group, res.Status.Allowed, c.allowed)
		}
	}
}

// testRunsAsServiceAccount runs the real binary with the ConfigMap's
// configuration and a token of the deployed ServiceAccount (what the pod
// gets), and checks that everything it does is permitted: it wins leader
// election, renews its canary, injects the rule's extension, writes the
// condition and Events, and ungates a node whose extension renews — and its
// log never says "forbidden".
func testRunsAsServiceAccount(t *testing.T, ctx context.Context, nodes []string) {
	env := testenv.Env(t)
	sa, err := env.ClientForServiceAccount(ctx, systemNamespace, controllerName)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	err = clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: env.APIServerURL, CertificateAuthority: env.CAFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"sa": {Token: sa.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"sa": {Cluster: "local", AuthInfo: "sa"}},
		CurrentContext: "sa",
	}, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	// The ConfigMap's configuration, with the kubeconfig (outside a pod) and a
	// free port instead of :8080/:8081.
	cm, err := env.Client.CoreV1().ConfigMaps(systemNamespace).Get(ctx, configMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(cm.Data[configFileName]), 4096).Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddresses(t, 1)[0]
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	cfg["serving"] = map[string]any{"metricsBindAddress": addr, "healthzBindAddress": addr}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, configFileName)
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := env.StartProcess(framework.ProcessSpec{Name: "nodehealth-controller", Path: testenv.Binary(t, "nodehealth-controller"), Args: []string{"--config", configPath}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := p.Stop(10 * time.Second); err != nil {
				t.Logf("stopping the controller: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	// Leader election in nodehealth-system, the canary in the extension namespace.
	if _, err := env.WaitForLease(ctx, systemNamespace, controllerName, func(l *coordinationv1.Lease) bool {
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}); err != nil {
		t.Fatalf("leader election: %v\n%s", err, p.LogTail(30))
	}
	if _, err := env.WaitForLease(ctx, leaseNamespace, canaryLease, func(l *coordinationv1.Lease) bool { return l.Spec.RenewTime != nil }); err != nil {
		t.Fatalf("canary: %v\n%s", err, p.LogTail(30))
	}
	// With the configuration as installed (no rules), a node that lists no
	// extension is not written: no taint, annotation or condition.
	plain := "deploy-plain"
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, framework.NewKwokNode(plain, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteNode(context.Background(), plain) })
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(10 * time.Second):
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, plain, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range n.ManagedFields {
		if strings.Contains(mf.Manager, "nodehealth") {
			t.Errorf("the default configuration wrote node %s (%s %s by %s)", plain, mf.Operation, mf.Subresource, mf.Manager)
		}
	}
	if framework.ReadinessTaints(n, "") != 0 || framework.ExtensionsReady(n) != "" || n.Annotations["nodehealth.io/system-extensions"] != "" {
		t.Errorf("the default configuration gated node %s: taints %v, condition %q", plain, n.Spec.Taints, framework.ExtensionsReady(n))
	}

	// The documented next step: a kube-proxy rule (docs/controller.md,
	// "Rolling out a rule"), written into the file the controller re-reads.
	cfg["extensionRules"] = []any{map[string]any{"name": "kube-proxy", "nodeSelector": map[string]any{}, "startupTimeout": "10m", "failurePolicy": "KeepGated"}}
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	// A changed file makes the controller release leadership and exit for
	// its pod to be restarted; here the test restarts it.
	stop()
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err = env.StartProcess(framework.ProcessSpec{Name: "nodehealth-controller-kube-proxy-rule", Path: testenv.Binary(t, "nodehealth-controller"), Args: []string{"--config", configPath}}); err != nil {
		t.Fatal(err)
	}
	stopped = false
	// The kube-proxy rule selects every node: its entry is written, and the
	// nodes report why in their condition.
	for _, name := range nodes {
		_, err := env.WaitForNode(ctx, name, func(n *corev1.Node) bool {
			return strings.Contains(n.Annotations["nodehealth.io/system-extensions"], "kube-proxy") && framework.ExtensionsReady(n) == corev1.ConditionFalse
		})
		if err != nil {
			t.Fatalf("node %s: %v\n%s", name, err, p.LogTail(30))
		}
	}
	// kube-proxy's heartbeat renews on the first node: it is ungated.
	kubeProxy, err := framework.StartExtensionRenewer(ctx, env.Client, framework.RenewerOptions{
		Namespace: leaseNamespace, Extension: "kube-proxy", Node: nodes[0], Holder: "kube-proxy-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubeProxy.Stop)
	if _, err := env.WaitForNode(ctx, nodes[0], func(n *corev1.Node) bool {
		return framework.ReadinessTaints(n, "") == 0 && framework.ExtensionsReady(n) == corev1.ConditionTrue
	}); err != nil {
		t.Fatalf("ungate: %v\n%s", err, p.LogTail(30))
	}
	// Events about Nodes land in "default", the only namespace it may write them to.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Source.Component == controllerName && e.InvolvedObject.Name == nodes[0] && e.Reason == "NodeUngated"
		}), nil
	})
	if err != nil {
		t.Errorf("no NodeUngated Event in namespace default: %v", err)
	}
	stop()
	logData, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logData), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the controller was denied something: %s", line)
		}
	}
}
