package test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the chart")

const (
	chartDir  = "../nodehealth"
	deployDir = "../.."
)

// The golden renders: what `helm template nodehealth deploy/charts/nodehealth`
// prints for the default values and for values that switch everything on
// and set every kind of value. make verify fails when they are stale; the
// chart integration test applies full.yaml to a real control plane.
func TestTheChartRendersWhatItsGoldenFilesSay(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"default", ""},
		{"full", "testdata/full-values.yaml"},
		{"eks", "../nodehealth/examples/values-eks.yaml"},
		{"gke", "../nodehealth/examples/values-gke.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := render(t, valuesFile(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run: cd deploy/charts/test && GOWORK=off go test . -run TestTheChartRendersWhatItsGoldenFilesSay -update)", err)
			}
			if got != string(want) {
				t.Errorf("the render of %s differs from %s; if the change is intended, run\n"+
					"  cd deploy/charts/test && GOWORK=off go test . -run TestTheChartRendersWhatItsGoldenFilesSay -update\n%s",
					tc.name, golden, firstDifference(string(want), got))
			}
		})
	}
}

// The default values run the project's own images, from its registry
// (ghcr.io/nodehealth, the project's home github.com/nodehealth/nodehealth)
// at the tag a release pushes, v + the chart's appVersion: never a name
// without a registry (Docker Hub, where the project holds no name; whoever
// registered it would run with node-patch and eviction rights), nor latest,
// nor the bare appVersion (releases tag vX.Y.Z). With every component and
// hook on, so that each image the chart can render is checked; and
// image.registry moves all of them at once.
func TestDefaultImagesAreTheProjectsWithAVersionTag(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	want := "v" + strings.TrimPrefix(ch.Metadata.AppVersion, "v")
	on := map[string]any{
		"updateOperator":          map[string]any{"enabled": true},
		"updateAgent":             map[string]any{"enabled": true},
		"mutatingAdmissionPolicy": map[string]any{"enabled": true},
	}
	for _, tc := range []struct {
		name     string
		vals     map[string]any
		registry string
	}{
		{"default values", map[string]any{}, "ghcr.io/nodehealth/"},
		{"every component", on, "ghcr.io/nodehealth/"},
		{"a mirror", map[string]any{"image": map[string]any{"registry": "registry.example.com/platform"}, "updateOperator": on["updateOperator"], "updateAgent": on["updateAgent"]}, "registry.example.com/platform/nodehealth/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := install(ch, tc.vals)
			if err != nil {
				t.Fatal(err)
			}
			stream := rel.Manifest
			for _, h := range rel.Hooks {
				stream += "\n---\n" + h.Manifest
			}
			images := regexp.MustCompile(`(?m)^\s*(?:- )?image:\s*"?([^"\s]+)"?\s*$`).FindAllStringSubmatch(stream, -1)
			if len(images) == 0 {
				t.Fatal("the render runs no image")
			}
			seen := map[string]bool{}
			for _, m := range images {
				ref := m[1]
				repo, tag, ok := strings.Cut(ref, ":")
				if !strings.HasPrefix(ref, tc.registry) || !ok || tag != want {
					t.Errorf("image %s, want %s<binary>:%s", ref, tc.registry, want)
				}
				seen[strings.TrimPrefix(repo, tc.registry)] = true
			}
			if tc.name != "default values" {
				for _, b := range []string{"nodehealth-controller", "update-operator", "update-agent"} {
					if !seen[b] {
						t.Errorf("the render does not run %s%s", tc.registry, b)
					}
				}
			}
		})
	}
	// An empty registry would make every image a Docker Hub name: refused.
	if _, err := install(ch, map[string]any{"image": map[string]any{"registry": ""}}); err == nil ||
		!strings.Contains(err.Error(), "/image/registry") {
		t.Errorf("image.registry \"\" was accepted (error: %v)", err)
	}
}

// helm uninstall must not take away what another release's pods mount: the
// example sidecars' ConfigMaps live beside the extension's DaemonSet (which
// this chart does not own) and are kept; the examples mount them optional,
// so a ConfigMap deleted by hand stops the sidecar, never the extension's
// own containers (a pod whose non-optional ConfigMap is gone stays in
// ContainerCreating: every new kube-proxy or CSI pod would).
func TestUninstallKeepsWhatTheExtensionsMount(t *testing.T) {
	out, err := render(t, valuesFile(t, "testdata/full-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configMaps := 0
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "ConfigMap" || !strings.HasSuffix(obj.Metadata.Name, "-heartbeat") {
			continue
		}
		configMaps++
		if obj.Metadata.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("ConfigMap %s, which the extension's sidecar mounts, is deleted by helm uninstall (no helm.sh/resource-policy: keep)", obj.Metadata.Name)
		}
	}
	if configMaps == 0 {
		t.Fatal("the full values render no example sidecar ConfigMap")
	}
	sidecars, err := filepath.Glob(filepath.Join(deployDir, "examples", "*", "sidecar.yaml"))
	if err != nil || len(sidecars) == 0 {
		t.Fatalf("no deploy/examples/*/sidecar.yaml (%v)", err)
	}
	for _, f := range sidecars {
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						Volumes []struct {
							Name      string `json:"name"`
							ConfigMap *struct {
								Optional *bool `json:"optional"`
							} `json:"configMap"`
						} `json:"volumes"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &ds); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) {
				t.Errorf("%s: volume %s mounts its ConfigMap without optional: true", f, v.Name)
			}
		}
	}
}

// The uninstall hook cannot hang an uninstall forever nor pile up: its Job
// has a deadline and a retry limit, and every pre-delete hook object is
// replaced on the next attempt and deleted once it succeeded.
func TestTheUninstallHookIsBounded(t *testing.T) {
	rel := mustInstall(t, map[string]any{})
	jobs := 0
	for _, h := range rel.Hooks {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				BackoffLimit          *int `json:"backoffLimit"`
				ActiveDeadlineSeconds *int `json:"activeDeadlineSeconds"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(h.Manifest), &obj); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(obj.Metadata.Annotations["helm.sh/hook"], "pre-delete") {
			continue
		}
		policy := obj.Metadata.Annotations["helm.sh/hook-delete-policy"]
		if !strings.Contains(policy, "before-hook-creation") || !strings.Contains(policy, "hook-succeeded") {
			t.Errorf("pre-delete hook %s %s: hook-delete-policy %q, want before-hook-creation and hook-succeeded", obj.Kind, obj.Metadata.Name, policy)
		}
		if obj.Kind != "Job" {
			continue
		}
		jobs++
		if d := obj.Spec.ActiveDeadlineSeconds; d == nil || *d <= 0 || *d > 900 {
			t.Errorf("Job %s: activeDeadlineSeconds %v, want a deadline of at most 15 minutes", obj.Metadata.Name, d)
		}
		if b := obj.Spec.BackoffLimit; b == nil || *b > 3 {
			t.Errorf("Job %s: backoffLimit %v, want at most 3", obj.Metadata.Name, b)
		}
	}
	if jobs != 1 {
		t.Errorf("%d pre-delete Jobs, want the uninstall Job", jobs)
	}
}

// The chart installs deploy/apf's FlowSchema and PriorityLevelConfiguration
// only when asked (apiPriorityAndFairness.enabled: they re-divide the API
// server's seats for the whole cluster), and then exactly those of the
// kustomize base, so both ways classify the heartbeats alike.
func TestAPFObjectsMatchKustomizeAndAreOptIn(t *testing.T) {
	isAPF := func(kind string) bool { return kind == "FlowSchema" || kind == "PriorityLevelConfiguration" }
	specs := func(stream string) map[string]any {
		out := map[string]any{}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			kind, _ := obj["kind"].(string)
			if !isAPF(kind) {
				continue
			}
			out[kind+" "+fmtString(obj["metadata"].(map[string]any)["name"])] = obj["spec"]
		}
		return out
	}
	def, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if got := specs(def); len(got) != 0 {
		t.Errorf("the default values install APF objects: %v", got)
	}
	full, err := render(t, valuesFile(t, "testdata/full-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(deployDir, "apf", "flowcontrol.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, got := specs(string(data)), specs(full)
	if len(want) != 2 {
		t.Fatalf("deploy/apf/flowcontrol.yaml has %d APF objects, want 2", len(want))
	}
	if !reflect.DeepEqual(got, want) {
		gy, _ := yaml.Marshal(got)
		wy, _ := yaml.Marshal(want)
		t.Errorf("with apiPriorityAndFairness.enabled the chart's APF objects differ from deploy/apf:\n--- chart\n%s--- kustomize\n%s", gy, wy)
	}
}

// Each alert's runbook is the documentation of the release the chart
// installs (its tag, v + appVersion), so the runbook matches the alert;
// runbookBaseURL replaces it with a copy of one's own.
func TestRunbooksAreTheReleasesDocs(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	runbook := regexp.MustCompile(`(?m)^\s*runbook_url:\s*"?([^"\s]+)"?\s*$`)
	for _, tc := range []struct{ name, base, want string }{
		{"default", "", "https://github.com/nodehealth/nodehealth/blob/v" + strings.TrimPrefix(ch.Metadata.AppVersion, "v") + "/docs/monitoring.md#"},
		{"own copy", "https://wiki.example.com/nodehealth/", "https://wiki.example.com/nodehealth#"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := map[string]any{"enabled": true}
			if tc.base != "" {
				rule["runbookBaseURL"] = tc.base
			}
			out, err := render(t, map[string]any{"monitoring": map[string]any{"prometheusRule": rule}})
			if err != nil {
				t.Fatal(err)
			}
			urls := runbook.FindAllStringSubmatch(out, -1)
			if len(urls) == 0 {
				t.Fatal("the PrometheusRule has no runbook_url")
			}
			for _, u := range urls {
				if !strings.HasPrefix(u[1], tc.want) {
					t.Errorf("runbook_url %s, want %s<anchor>", u[1], tc.want)
				}
			}
		})
	}
}

// A first install touches no node: the chart creates no UpdatePolicy unless
// asked. One it is asked for is a plain resource of the release wherever its
// CRD is served, so that helm upgrade patches it instead of re-creating it
// (a hook re-created on every upgrade undid kubectl nodehealth update
// pause); only on the install that brings the CRD (a custom resource beside
// its own CRD fails the install) is it a post-install hook, carrying Helm's
// ownership metadata so that the next upgrade adopts it.
func TestTheChartCreatesAnUpdatePolicyOnlyWhenAskedAndOwnsItAsAPlainResource(t *testing.T) {
	const policy = "apiVersion: updates.nodehealth.io/v1alpha1\nkind: UpdatePolicy\n"
	def := mustInstall(t, map[string]any{})
	if strings.Contains(def.Manifest, policy) {
		t.Error("the default values create an UpdatePolicy")
	}
	for _, h := range def.Hooks {
		if strings.Contains(h.Manifest, policy) {
			t.Errorf("the default values create an UpdatePolicy hook (%s)", h.Path)
		}
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := valuesFile(t, "testdata/full-values.yaml")
	served := func(i *action.Install) {
		i.APIVersions = common.VersionSet{"updates.nodehealth.io/v1alpha1", updatePolicyKind}
	}
	for _, tc := range []struct {
		name string
		mod  func(*action.Install)
	}{
		// helm upgrade: the CRD the install created is served.
		{"upgrade", func(i *action.Install) { served(i); i.IsUpgrade = true }},
		// helm install where the CRDs are already there (kept by an
		// earlier release, or applied with kustomize).
		{"install with the CRD served", served},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := installWith(ch, vals, "nodehealth-system", tc.mod)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range rel.Hooks {
				if strings.Contains(h.Manifest, policy) {
					t.Errorf("the UpdatePolicy is a hook (%s):\n%s", h.Path, h.Manifest)
				}
			}
			doc := docOf(rel.Manifest, policy)
			if doc == "" {
				t.Fatal("the UpdatePolicy is not in the release's manifest")
			}
			if strings.Contains(doc, "helm.sh/hook") {
				t.Errorf("the UpdatePolicy carries hook annotations:\n%s", doc)
			}
			if !strings.Contains(doc, "helm.sh/resource-policy: keep") {
				t.Errorf("the UpdatePolicy is deleted by helm uninstall:\n%s", doc)
			}
		})
	}
	// The install that brings the CRD.
	first := mustInstall(t, vals)
	if strings.Contains(first.Manifest, policy) {
		t.Fatal("the UpdatePolicy is in the manifest of the install that creates its CRD: Helm cannot map it")
	}
	var hook string
	for _, h := range first.Hooks {
		if d := docOf(h.Manifest, policy); d != "" {
			hook = d
		}
	}
	for _, want := range []string{"helm.sh/hook: post-install\n", "app.kubernetes.io/managed-by: Helm",
		"meta.helm.sh/release-name: nodehealth", "meta.helm.sh/release-namespace: nodehealth-system"} {
		if !strings.Contains(hook, want) {
			t.Errorf("the first install's UpdatePolicy hook lacks %q (the next upgrade adopts it by Helm's ownership metadata):\n%s", want, hook)
		}
	}
	if strings.Contains(hook, "post-upgrade") {
		t.Errorf("the first install's UpdatePolicy hook runs on upgrades:\n%s", hook)
	}
}

// updatePolicyKind is how discovery lists the UpdatePolicy CRD in
// .Capabilities.APIVersions once it is served.
const updatePolicyKind = "updates.nodehealth.io/v1alpha1/UpdatePolicy"

// docOf is the YAML document of a multi-document stream that contains s.
func docOf(stream, s string) string {
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		if strings.Contains(d, s) {
			return d
		}
	}
	return ""
}

// NOTES.txt says what the install does: with the default values, nothing to
// any node; with rules, which ones gate.
func TestTheChartsNotesSayWhatTheInstallDoes(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         []string
	}{
		{"default", "", []string{"What it does now: nothing to your nodes", "kubectl -n nodehealth-system get deployment nodehealth-controller"}},
		{"eks", "../nodehealth/examples/values-eks.yaml", []string{"3 extension rule(s) gate the nodes they select\n(kube-proxy, aws-node, ebs-csi-node)", "nodehealth.io/not-ready"}},
		{"gke", "../nodehealth/examples/values-gke.yaml", []string{"1 extension rule(s) gate the nodes they select\n(kube-proxy)", "startup-taint.cluster-autoscaler.kubernetes.io/nodehealth-not-ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := loader.Load(chartDir)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := install(ch, valuesFile(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(rel.Info.Notes, w) {
					t.Errorf("NOTES.txt does not say %q:\n%s", w, rel.Info.Notes)
				}
			}
		})
	}
}

// Installed into another namespace, every namespaced object of the
// controller, the operator and the hook follows the release, and so do
// their RBAC subjects and leader-election Leases; nothing is left in the
// kustomize bases' nodehealth-system.
func TestEveryNamespacedObjectFollowsTheReleaseNamespace(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := installIn(ch, valuesFile(t, "testdata/full-values.yaml"), "platform")
	if err != nil {
		t.Fatal(err)
	}
	out := rel.Manifest
	for _, h := range rel.Hooks {
		out += "\n---\n" + h.Manifest
	}
	if strings.Contains(out, "nodehealth-system") {
		for i, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "nodehealth-system") {
				t.Errorf("line %d still names nodehealth-system: %s", i+1, line)
			}
		}
	}
	for _, want := range []string{
		"kind: Deployment\nmetadata:\n  name: nodehealth-controller\n  namespace: platform",
		"kind: Job\nmetadata:\n  name: nodehealth-uninstall\n  namespace: platform",
		"resourceNamespace: platform",
		"--stop-deployment=platform/nodehealth-controller",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the render in namespace platform lacks %q", want)
		}
	}
}

// With another taint.key, every pod of the chart (the controller, the
// operator, the agent, the uninstall hook) tolerates that key, on both
// effects, and not the default one: a pod that does not tolerate the key in
// force cannot run on a gated node, and a controller that cannot run there
// makes the gate permanent.
func TestThePodsTolerateTheConfiguredTaintKey(t *testing.T) {
	const key = "example.com/not-ready"
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := valuesFile(t, "testdata/full-values.yaml")
	controller := vals["controller"].(map[string]any)
	cfg, _ := controller["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
		controller["config"] = cfg
	}
	cfg["taint"] = map[string]any{"key": key}
	rel, err := install(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	stream := rel.Manifest
	for _, h := range rel.Hooks {
		stream += "\n---\n" + h.Manifest
	}
	pods := 0
	for _, doc := range strings.Split(stream, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Tolerations []struct {
							Key    string `json:"key"`
							Effect string `json:"effect"`
						} `json:"tolerations"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		switch obj.Kind {
		case "Deployment", "DaemonSet", "Job":
		default:
			continue
		}
		pods++
		effects := map[string]bool{}
		for _, tol := range obj.Spec.Template.Spec.Tolerations {
			switch tol.Key {
			case key:
				effects[tol.Effect] = true
			case "nodehealth.io/not-ready":
				t.Errorf("%s %s tolerates the default key, not the configured one", obj.Kind, obj.Metadata.Name)
			}
		}
		if !effects["NoSchedule"] || !effects["NoExecute"] {
			t.Errorf("%s %s tolerates %s on %v; want NoSchedule and NoExecute", obj.Kind, obj.Metadata.Name, key, effects)
		}
	}
	if pods < 4 {
		t.Errorf("found %d pod templates; want the controller, the operator, the agent and the uninstall hook at least", pods)
	}
}

// With another taint.key (for example the autoscaler's start-up prefix of
// examples/values-gke.yaml), the MutatingAdmissionPolicy taints new Nodes
// with that key, not the default one: a default-key taint on a controller
// configured otherwise is one nobody removes, and every new node would stay
// unschedulable for ever.
func TestTheAdmissionPolicyTaintsNewNodesWithTheConfiguredKey(t *testing.T) {
	const key = "startup-taint.cluster-autoscaler.kubernetes.io/nodehealth-not-ready"
	rel := mustInstall(t, map[string]any{
		"mutatingAdmissionPolicy": map[string]any{"enabled": true},
		"controller":              map[string]any{"config": map[string]any{"taint": map[string]any{"key": key}}},
	})
	var policy string
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		if strings.Contains(doc, "kind: MutatingAdmissionPolicy\n") {
			policy = doc
		}
	}
	if policy == "" {
		t.Fatal("no MutatingAdmissionPolicy rendered")
	}
	// The match condition that skips a Node already tainted, and the two
	// patches (an empty taint list, a list to append to).
	if got := strings.Count(policy, key); got != 3 {
		t.Errorf("the policy names %s %d times, want 3 (the match condition and both patches):\n%s", key, got, policy)
	}
	if strings.Contains(policy, "nodehealth.io/not-ready") {
		t.Errorf("the policy still names the default key nodehealth.io/not-ready:\n%s", policy)
	}
}

// A misspelt or misplaced value fails the install with the schema's message
// naming it, instead of being ignored; inside the configuration objects too.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         *regexp.Regexp
	}{
		{"unknown top-level key", "controler:\n  enabled: true\n", regexp.MustCompile(`additional properties 'controler' not allowed`)},
		{"misspelt component key", "controller:\n  replica: 3\n", regexp.MustCompile(`at '/controller': additional properties 'replica' not allowed`)},
		{"misspelt config field", "controller:\n  config:\n    extensionRule: []\n", regexp.MustCompile(`at '/controller/config': additional properties 'extensionRule' not allowed`)},
		{"nested config field", "controller:\n  config:\n    blastRadius:\n      clusterThreshold: 30\n", regexp.MustCompile(`at '/controller/config/blastRadius': additional properties 'clusterThreshold' not allowed`)},
		{"config field of a list item", "controller:\n  config:\n    extensionRules:\n    - name: x\n      nodeSelector: {}\n      startupTimeOut: 5m\n", regexp.MustCompile(`at '/controller/config/extensionRules/0': additional properties 'startupTimeOut' not allowed`)},
		{"wrong type", "controller:\n  config:\n    workers: many\n", regexp.MustCompile(`at '/controller/config/workers': got string, want (integer|null)`)},
		{"duration as a number", "updateOperator:\n  config:\n    stateDeadlines:\n      returnToIdle: 300\n", regexp.MustCompile(`at '/updateOperator/config/stateDeadlines/returnToIdle': got number, want (null or )?string`)},
		{"another Kind", "updateAgent:\n  config:\n    kind: UpdateOperatorConfiguration\n", regexp.MustCompile(`at '/updateAgent/config/kind': value must be 'UpdateAgentConfiguration'`)},
		{"heartbeat config", "exampleSidecars:\n  kubeProxy:\n    config:\n      probe:\n        htp: {}\n", regexp.MustCompile(`at '/exampleSidecars/kubeProxy/config/probe': additional properties 'htp' not allowed`)},
		{"bad pull policy", "image:\n  pullPolicy: Sometimes\n", regexp.MustCompile(`at '/image/pullPolicy': value must be one of`)},
		{"digest without algorithm", "controller:\n  image:\n    digest: 0123abcd\n", regexp.MustCompile(`at '/controller/image/digest': '0123abcd' does not match pattern`)},
		{"argument not a string", "updateOperator:\n  extraArgs:\n  - 2\n", regexp.MustCompile(`at '/updateOperator/extraArgs/0': got number, want string`)},
		{"env without name", "updateAgent:\n  extraEnv:\n  - value: x\n", regexp.MustCompile(`at '/updateAgent/extraEnv/0': missing property 'name'`)},
		{"mount of nothing", "updateOperator:\n  mounts:\n  - name: am\n    mountPath: /etc/am\n", regexp.MustCompile(`at '/updateOperator/mounts/0': 'oneOf' failed`)},
		{"mount of a Secret and a ConfigMap", "updateOperator:\n  mounts:\n  - name: am\n    mountPath: /etc/am\n    secret: a\n    configMap: b\n", regexp.MustCompile(`at '/updateOperator/mounts/0': 'oneOf' failed`)},
		{"mount over the configuration", "updateOperator:\n  mounts:\n  - name: am\n    mountPath: /etc/nodehealth/am\n    secret: a\n", regexp.MustCompile(`at '/updateOperator/mounts/0/mountPath': 'not' failed`)},
		{"mount named as the configuration's volume", "updateOperator:\n  mounts:\n  - name: config\n    mountPath: /etc/am\n    secret: a\n", regexp.MustCompile(`at '/updateOperator/mounts/0/name': 'not' failed`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(path, []byte(tc.values), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := render(t, valuesFile(t, path))
			if err == nil {
				t.Fatalf("values\n%s\nwere accepted", tc.values)
			}
			if !tc.want.MatchString(err.Error()) {
				t.Errorf("error\n%v\ndoes not match %s", err, tc.want)
			}
		})
	}
}

// The platform values files of examples/ (the ones values.yaml and
// docs/install.md point to) install as they are: the values schema accepts
// them, and every extension rule they switch on comes with the heartbeat of
// that extension switched on, and every heartbeat with its rule. A rule
// without its heartbeat gates every node it selects.
func TestTheExampleValuesFilesInstallAsTheyAre(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "values-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range files {
		found[filepath.Base(f)] = true
	}
	for _, want := range []string{"values-eks.yaml", "values-gke.yaml"} {
		if !found[want] {
			t.Errorf("examples/%s is missing", want)
		}
	}
	defaults := valuesFile(t, filepath.Join(chartDir, "values.yaml"))
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			vals := valuesFile(t, file)
			if _, err := render(t, vals); err != nil {
				t.Fatal(err)
			}
			heartbeats := map[string]string{} // extension name: exampleSidecars key
			sidecars, _ := vals["exampleSidecars"].(map[string]any)
			for key, v := range sidecars {
				if on, _ := v.(map[string]any)["enabled"].(bool); !on {
					continue
				}
				if _, ok := defaults["exampleSidecars"].(map[string]any)[key]; !ok {
					t.Errorf("exampleSidecars.%s is not one of the chart's", key)
					continue
				}
				var hb struct {
					ExtensionName string `json:"extensionName"`
				}
				data, err := os.ReadFile(filepath.Join(chartDir, "files", "examples", kebab(key), "heartbeat.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if err := yaml.Unmarshal(data, &hb); err != nil {
					t.Fatal(err)
				}
				if cfg, _ := v.(map[string]any)["config"].(map[string]any); cfg != nil {
					if name, ok := cfg["extensionName"].(string); ok {
						hb.ExtensionName = name
					}
				}
				heartbeats[hb.ExtensionName] = key
			}
			controller, _ := vals["controller"].(map[string]any)
			cfg, _ := controller["config"].(map[string]any)
			rules, _ := cfg["extensionRules"].([]any)
			if len(rules) == 0 {
				t.Error("no extension rule: the file would install a controller that gates nothing")
			}
			ruled := map[string]bool{}
			for _, r := range rules {
				name, _ := r.(map[string]any)["name"].(string)
				ruled[name] = true
				if _, ok := heartbeats[name]; !ok {
					t.Errorf("rule %q has no heartbeat switched on (exampleSidecars): it would gate every node it selects", name)
				}
			}
			for name, key := range heartbeats {
				if !ruled[name] {
					t.Errorf("exampleSidecars.%s (extension %q) is on without a rule", key, name)
				}
			}
		})
	}
}

// kebab is the chart's kebabcase of an exampleSidecars key: its folder.
func kebab(key string) string {
	var b strings.Builder
	for i, r := range key {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The chart's default configurations are those of the kustomize bases, so
// that both install methods run the same configuration.
func TestDefaultConfigsMatchKustomize(t *testing.T) {
	values := valuesFile(t, filepath.Join(chartDir, "values.yaml"))
	for component, file := range map[string]string{
		"controller":     "controller/config.yaml",
		"updateOperator": "update-operator/config.yaml",
		"updateAgent":    "update-agent/config.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(deployDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got := values[component].(map[string]any)["config"]
		if !reflect.DeepEqual(got, want) {
			gotY, _ := yaml.Marshal(got)
			t.Errorf("values.yaml %s.config differs from deploy/%s:\n--- values.yaml\n%s--- deploy/%s\n%s", component, file, gotY, file, data)
		}
	}
}

// The chart grants exactly the RBAC of the kustomize bases, rule for rule:
// every Role, ClusterRole and binding of deploy/ for the enabled
// components, and no other. (The chart renders them from copies of the same
// files; this catches a stale copy and any RBAC written into a template.)
func TestRBACMatchesKustomize(t *testing.T) {
	out, err := render(t, valuesFile(t, "testdata/full-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := rbacObjects(t, out)
	want := map[string]map[string]any{}
	for _, f := range []string{"controller/rbac.yaml", "extensions/rbac.yaml", "update-operator/rbac.yaml", "update-operator/hooks.yaml", "update-agent/rbac.yaml", "uninstall/rbac.yaml"} {
		data, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rbacObjects(t, string(data)) {
			want[k] = v
		}
	}
	// The example sidecars' bindings: deploy/examples/<x>/rbac.yaml with the
	// subjects the kustomize Component fills in from the DaemonSet.
	full := valuesFile(t, "testdata/full-values.yaml")
	defaults := valuesFile(t, filepath.Join(chartDir, "values.yaml"))
	for key, dir := range map[string]string{"kubeProxy": "kube-proxy", "csiNode": "csi-node", "devicePlugin": "device-plugin", "loggingAgent": "logging-agent",
		"cilium": "cilium", "calicoNode": "calico-node", "awsNode": "aws-node", "gkeKubeProxy": "gke-kube-proxy"} {
		ex := map[string]any{}
		for _, vals := range []map[string]any{defaults, full} {
			set, _ := vals["exampleSidecars"].(map[string]any)[key].(map[string]any)
			for k, v := range set {
				ex[k] = v
			}
		}
		if ex["enabled"] != true {
			continue
		}
		data, err := os.ReadFile(filepath.Join(deployDir, "examples", dir, "rbac.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rbacObjects(t, string(data)) {
			v["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": ex["serviceAccount"], "namespace": ex["namespace"]}}
			want[k] = v
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(w)
			t.Errorf("%s differs:\n--- chart\n%s--- kustomize\n%s", k, gy, wy)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which the kustomize bases do not grant", k)
		}
	}
}

// rbacObjects returns the RBAC objects of a YAML stream by kind/namespace/name,
// reduced to what grants: rules, roleRef and subjects.
func rbacObjects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		kind, _ := obj["kind"].(string)
		switch kind {
		case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount":
		default:
			continue
		}
		meta := obj["metadata"].(map[string]any)
		// The metrics reader's binding names the user's Prometheus
		// (monitoring.metricsReader), which kustomize users bind themselves.
		if kind == "ClusterRoleBinding" && meta["name"] == "nodehealth-metrics-reader" {
			continue
		}
		key := kind + " " + strings.TrimPrefix(fmtString(meta["namespace"])+"/", "/") + fmtString(meta["name"])
		reduced := map[string]any{}
		for _, f := range []string{"rules", "roleRef", "subjects", "aggregationRule"} {
			if v, ok := obj[f]; ok {
				reduced[f] = v
			}
		}
		out[key] = reduced
	}
	return out
}

func fmtString(v any) string {
	s, _ := v.(string)
	return s
}

// valuesFile reads a values file; "" is no values.
func valuesFile(t *testing.T, path string) map[string]any {
	t.Helper()
	if path == "" {
		return map[string]any{}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vals
}

// render is `helm template nodehealth deploy/charts/nodehealth` with the
// SDK: a client-only dry-run install, which validates the values against
// values.schema.json.
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return renderChart(ch, vals)
}

func renderChart(ch *chart.Chart, vals map[string]any) (string, error) {
	r, err := install(ch, vals)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	out.WriteString(strings.TrimSpace(r.Manifest))
	out.WriteString("\n")
	// The hooks, as helm template prints them: after the manifest.
	for _, h := range r.Hooks {
		out.WriteString("---\n# Source: " + h.Path + "\n")
		out.WriteString(strings.TrimSpace(h.Manifest))
		out.WriteString("\n")
	}
	return out.String(), nil
}

// install is a client-only dry-run install of the release "nodehealth" in
// namespace "nodehealth-system", as docs/install.md installs it.
// mustInstall installs the chart of chartDir with vals, failing the test on
// any error.
func mustInstall(t *testing.T, vals map[string]any) *releasev1.Release {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := install(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func install(ch *chart.Chart, vals map[string]any) (*releasev1.Release, error) {
	return installIn(ch, vals, "nodehealth-system")
}

func installIn(ch *chart.Chart, vals map[string]any, namespace string) (*releasev1.Release, error) {
	return installWith(ch, vals, namespace, nil)
}

// installWith is installIn with the action changed by mod (nil: none), as
// helm template's --is-upgrade and --api-versions change it.
func installWith(ch *chart.Chart, vals map[string]any, namespace string, mod func(*action.Install)) (*releasev1.Release, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "nodehealth"
	install.Namespace = namespace
	install.Replace = true
	// The control plane the integration tests apply the render to.
	kubeVersion, err := common.ParseKubeVersion("v1.37.1")
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kubeVersion
	if mod != nil {
		mod(install)
	}
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	return rel.(*releasev1.Release), nil
}

// firstDifference shows the lines around the first differing line.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		if i >= len(w) || i >= len(g) || w[i] != g[i] {
			lo := max(0, i-3)
			var b strings.Builder
			for j := lo; j < i+4; j++ {
				if j < len(w) {
					b.WriteString("- " + w[j] + "\n")
				}
			}
			for j := lo; j < i+4; j++ {
				if j < len(g) {
					b.WriteString("+ " + g[j] + "\n")
				}
			}
			return b.String()
		}
	}
	return ""
}
