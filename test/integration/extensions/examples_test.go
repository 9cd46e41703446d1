package extensions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/testenv"
)

// The ready-made heartbeats of deploy/examples/ and what each must produce.
var examples = []struct {
	dir       string
	daemonSet string
	extension string
	// vendor is the vendor's container, which must stay the default one;
	// empty for a standalone heartbeat.
	vendor string
	// standalone: a Kustomization with a DaemonSet of its own in the host
	// network (the managed add-on pattern), not a Component patching the
	// vendor's DaemonSet.
	standalone bool
}{
	{dir: "kube-proxy", daemonSet: "kube-proxy", extension: "kube-proxy", vendor: "kube-proxy"},
	{dir: "csi-node", daemonSet: "ebs-csi-node", extension: "ebs-csi-node", vendor: "ebs-plugin"},
	{dir: "device-plugin", daemonSet: "nvidia-device-plugin-daemonset", extension: "nvidia-device-plugin", vendor: "nvidia-device-plugin-ctr"},
	{dir: "logging-agent", daemonSet: "fluent-bit", extension: "fluent-bit", vendor: "fluent-bit"},
	{dir: "cilium", daemonSet: "cilium", extension: "cilium", vendor: "cilium-agent"},
	{dir: "calico-node", daemonSet: "calico-node", extension: "calico-node", vendor: "calico-node"},
	{dir: "aws-node", daemonSet: "aws-node-heartbeat", extension: "aws-node", standalone: true},
	{dir: "gke-kube-proxy", daemonSet: "gke-kube-proxy-heartbeat", extension: "kube-proxy", standalone: true},
}

// Each example Component renders against the minimal vendor DaemonSet shipped
// in its folder (a standalone example renders as it is), the API server
// accepts the result (server-side dry run: schema, defaulting, admission),
// and the embedded heartbeat configuration is accepted as is by
// extension-heartbeat.
func TestEveryExampleRendersIsAcceptedByTheAPIServerAndCarriesAValidHeartbeatConfiguration(t *testing.T) {
	installSecurity(t) // the Roles the examples bind to
	entries, err := os.ReadDir(repoPath(t, "deploy", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, e := range examples {
		covered[e.dir] = true
	}
	for _, e := range entries {
		if e.IsDir() && !covered[e.Name()] {
			t.Errorf("deploy/examples/%s is not covered by this test", e.Name())
		}
	}

	for _, ex := range examples {
		t.Run(ex.dir, func(t *testing.T) {
			ctx := testenv.Context(t)
			var rendered string
			if ex.standalone {
				rendered = mustKubectl(t, ctx, "kustomize", repoPath(t, "deploy", "examples", ex.dir))
			} else {
				rendered = renderExample(t, ex.dir)
			}
			objs := decodeAll(t, rendered)

			ds := findObject[*appsv1.DaemonSet](t, objs, ex.daemonSet)
			if ex.standalone {
				checkStandalone(t, ds, ex.extension)
			} else {
				checkSidecar(t, ds, ex.extension, ex.vendor)
			}
			cm := findObject[*corev1.ConfigMap](t, objs, ex.extension+"-heartbeat")
			if cm.Namespace != ds.Namespace {
				t.Errorf("ConfigMap in namespace %q, DaemonSet in %q", cm.Namespace, ds.Namespace)
			}
			checkBindings(t, objs, ex.extension+"-heartbeat", ds)

			// The namespaces the vendor manifests live in exist in a real
			// cluster; the dry run needs them too.
			for _, ns := range []string{ds.Namespace} {
				_, err := testenv.Env(t).Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			file := filepath.Join(t.TempDir(), "rendered.yaml")
			if err := os.WriteFile(file, []byte(rendered), 0o644); err != nil {
				t.Fatal(err)
			}
			out := mustKubectl(t, ctx, "apply", "--server-side", "--dry-run=server", "-f", file)
			if !strings.Contains(out, "daemonset.apps/"+ex.daemonSet+" serverside-applied (server dry run)") {
				t.Errorf("dry run output:\n%s", out)
			}

			// The heartbeat configuration as extension-heartbeat reads it.
			config := filepath.Join(t.TempDir(), "heartbeat.yaml")
			if err := os.WriteFile(config, []byte(cm.Data["heartbeat.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
			// With the sidecar's arguments as the kubelet substitutes
			// them, for an IPv6 pod IP (the hard case: no brackets).
			args := []string{"--config", config, "--node-name", "n1", "--write-config-to", "-"}
			for _, a := range heartbeatContainer(t, ds).Args {
				if strings.Contains(a, "$(POD_IP)") {
					args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "fd00:10:244::7"))
				}
			}
			stdout, stderr, err := command(t, ctx, testenv.Binary(t, "extension-heartbeat"), args...)
			if err != nil || strings.Contains(stderr, "note:") {
				t.Fatalf("extension-heartbeat rejects the configuration: %v\nstderr:\n%s", err, stderr)
			}
			var effective struct {
				ExtensionName string `json:"extensionName"`
				Lease         struct {
					Namespace string `json:"namespace"`
				} `json:"lease"`
				Serving struct {
					MetricsBindAddress string `json:"metricsBindAddress"`
					HealthzBindAddress string `json:"healthzBindAddress"`
				} `json:"serving"`
			}
			if err := yaml.Unmarshal([]byte(stdout), &effective); err != nil {
				t.Fatal(err)
			}
			for _, addr := range []string{effective.Serving.MetricsBindAddress, effective.Serving.HealthzBindAddress} {
				if !strings.HasPrefix(addr, "[fd00:10:244::7]:") {
					t.Errorf("effective bind address %q, want the pod's IP", addr)
				}
			}
			if effective.ExtensionName != ex.extension || effective.Lease.Namespace != leaseNamespace {
				t.Errorf("effective configuration: extensionName %q, lease namespace %q; want %q, %q",
					effective.ExtensionName, effective.Lease.Namespace, ex.extension, leaseNamespace)
			}

			// The README documents the matching controller rule.
			readme, err := os.ReadFile(repoPath(t, "deploy", "examples", ex.dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(readme), "extensionRules:\n- name: "+ex.extension+"\n") {
				t.Errorf("README.md of %s does not document the controller rule %q", ex.dir, ex.extension)
			}
		})
	}
}

// renderExample runs `kubectl kustomize` on an overlay of the example's base
// and Component, written the way the README tells users to.
func renderExample(t *testing.T, dir string) string {
	t.Helper()
	overlay := t.TempDir()
	component := repoPath(t, "deploy", "examples", dir)
	base, err := filepath.Rel(overlay, filepath.Join(component, "base"))
	if err != nil {
		t.Fatal(err)
	}
	comp, err := filepath.Rel(overlay, component)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + base + "\ncomponents:\n- " + comp + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return mustKubectl(t, testenv.Context(t), "kustomize", overlay)
}

func checkSidecar(t *testing.T, ds *appsv1.DaemonSet, extension, vendor string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if got := ds.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"]; got != vendor {
		t.Errorf("default container = %q, want the vendor's %q", got, vendor)
	}
	vendorFound := false
	for i := range spec.Containers {
		vendorFound = vendorFound || spec.Containers[i].Name == vendor
	}
	if !vendorFound {
		t.Errorf("the vendor's container %q was lost", vendor)
	}
	checkHeartbeatContainer(t, ds, extension, true)
	if len(spec.Tolerations) < 3 {
		t.Errorf("the vendor's tolerations were replaced: %v", spec.Tolerations)
	}
}

// checkStandalone checks a heartbeat DaemonSet of its own: the managed
// add-on's endpoint is on the node's loopback, which only the host network
// reaches, and the heartbeat must run on gated nodes.
func checkStandalone(t *testing.T, ds *appsv1.DaemonSet, extension string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Errorf("%s is not in the host network: 127.0.0.1 would be its own pod's, not the add-on's", ds.Name)
	}
	if len(spec.Containers) != 1 {
		t.Errorf("%s runs %d containers, want the heartbeat alone", ds.Name, len(spec.Containers))
	}
	if spec.ServiceAccountName == "" || spec.ServiceAccountName == "default" {
		t.Errorf("%s runs as ServiceAccount %q; binding it would give Lease writes to every pod of the namespace", ds.Name, spec.ServiceAccountName)
	}
	checkHeartbeatContainer(t, ds, extension, false)
}

// checkHeartbeatContainer checks the extension-heartbeat container of ds and
// that ds tolerates the readiness taint: by its key when explicit (a
// sidecar's Component adds its own, since the vendor's tolerations may
// narrow), or else also through a toleration of every key (a standalone
// DaemonSet tolerating what its add-on tolerates).
func checkHeartbeatContainer(t *testing.T, ds *appsv1.DaemonSet, extension string, explicit bool) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	sidecar := heartbeatContainer(t, ds)
	// /metrics and /healthz listen on the pod's IP, which in the host
	// network is the node's, never on all of the node's interfaces; the
	// ports are the container's and the probe's.
	ports := map[string]int32{}
	for _, p := range sidecar.Ports {
		ports[p.Name] = p.ContainerPort
	}
	wantArgs := []string{"--config=/etc/nodehealth/heartbeat.yaml", "--node-name=$(NODE_NAME)",
		fmt.Sprintf("--metrics-bind-address=$(POD_IP):%d", ports["hb-metrics"]),
		fmt.Sprintf("--healthz-bind-address=$(POD_IP):%d", ports["hb-healthz"])}
	if strings.Join(sidecar.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("sidecar args = %v, want %v", sidecar.Args, wantArgs)
	}
	if p := sidecar.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntVal != ports["hb-healthz"] || p.HTTPGet.Host != "" {
		t.Errorf("the liveness probe %+v does not reach /healthz on the pod's IP, port %d", p, ports["hb-healthz"])
	}
	fieldRefs := map[string]string{}
	for _, e := range sidecar.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldRefs[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if fieldRefs["NODE_NAME"] != "spec.nodeName" || fieldRefs["POD_NAME"] != "metadata.name" || fieldRefs["POD_IP"] != "status.podIP" {
		t.Errorf("sidecar downward-API env = %v, want NODE_NAME=spec.nodeName, POD_NAME=metadata.name and POD_IP=status.podIP", fieldRefs)
	}
	configVolume := ""
	for _, m := range sidecar.VolumeMounts {
		if m.MountPath == "/etc/nodehealth" {
			if m.SubPath != "" {
				t.Errorf("config mounted with subPath %q: ConfigMap edits would never reach the sidecar", m.SubPath)
			}
			configVolume = m.Name
		}
	}
	configMap := ""
	for _, v := range spec.Volumes {
		if v.Name == configVolume && v.ConfigMap != nil {
			configMap = v.ConfigMap.Name
		}
	}
	if configMap != extension+"-heartbeat" {
		t.Errorf("the sidecar's /etc/nodehealth is volume %q of ConfigMap %q, want ConfigMap %s-heartbeat", configVolume, configMap, extension)
	}
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		taint := corev1.Taint{Key: nodev1alpha1.DefaultReadinessTaintKey, Effect: effect}
		tolerated := false
		for _, tol := range spec.Tolerations {
			keyMatches := tol.Key == taint.Key || (!explicit && tol.Key == "")
			effectMatches := tol.Effect == effect || (!explicit && tol.Effect == "")
			tolerated = tolerated || (keyMatches && tol.Operator == corev1.TolerationOpExists && effectMatches)
		}
		if !tolerated {
			t.Errorf("%s does not tolerate {key: %s, effect: %s}: %v", ds.Name, taint.Key, effect, spec.Tolerations)
		}
	}
}

// checkBindings checks that the DaemonSet's ServiceAccount is bound to the
// Roles of deploy/extensions/ and to nothing else.
func checkBindings(t *testing.T, objs []runtime.Object, name string, ds *appsv1.DaemonSet) {
	t.Helper()
	want := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ds.Spec.Template.Spec.ServiceAccountName, Namespace: ds.Namespace}
	rb := findObject[*rbacv1.RoleBinding](t, objs, name)
	if rb.Namespace != leaseNamespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != leaseRole || len(rb.Subjects) != 1 || rb.Subjects[0] != want {
		t.Errorf("RoleBinding %s/%s: roleRef %+v subjects %+v; want Role %s in %s for %+v", rb.Namespace, rb.Name, rb.RoleRef, rb.Subjects, leaseRole, leaseNamespace, want)
	}
	crb := findObject[*rbacv1.ClusterRoleBinding](t, objs, name)
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != identityRole || len(crb.Subjects) != 1 || crb.Subjects[0] != want {
		t.Errorf("ClusterRoleBinding %s: roleRef %+v subjects %+v; want ClusterRole %s for %+v", crb.Name, crb.RoleRef, crb.Subjects, identityRole, want)
	}
	for _, o := range objs {
		switch o.(type) {
		case *rbacv1.Role, *rbacv1.ClusterRole:
			t.Errorf("the example defines its own RBAC rules (%T); it must only bind the Roles of deploy/extensions/", o)
		}
	}
}

// decodeAll decodes a multi-document YAML stream into typed objects, strictly:
// a field the scheme does not know is an error.
func decodeAll(t *testing.T, manifests string) []runtime.Object {
	t.Helper()
	objs, err := framework.DecodeManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func findObject[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if typed, ok := o.(T); ok && typed.GetName() == name {
			return typed
		}
	}
	var zero T
	t.Fatalf("no %T named %s in the rendered manifests", zero, name)
	return zero
}

// heartbeatContainer is ds's extension-heartbeat container.
func heartbeatContainer(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	for i := range ds.Spec.Template.Spec.Containers {
		if c := &ds.Spec.Template.Spec.Containers[i]; c.Name == "extension-heartbeat" {
			return c
		}
	}
	t.Fatalf("no extension-heartbeat container in %s", ds.Name)
	return nil
}
