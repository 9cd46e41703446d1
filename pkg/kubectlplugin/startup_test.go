package kubectlplugin

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
)

// bootRecord sets the node's boot record, its current bootID and the UID
// the records below name.
func bootRecord(record string, bootID string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.UID = "uid-n"
		n.Status.NodeInfo.BootID = bootID
		n.Annotations[nodev1alpha1.BootAnnotation] = record
	}
}

const (
	rebootRecord = `{"bootID":"boot-2","uid":"uid-n","startup":{"cause":"NodeRebooted","start":"2026-07-01T11:50:00Z","ready":"41.2s",` +
		`"extensions":[{"name":"cni","ready":"38.1s"},{"name":"kube-proxy","ready":"12s"},{"name":"csi","ready":"3.4s"}],"omitted":2}}`
	newNodeRecord = `{"bootID":"boot-1","uid":"uid-n","startup":{"cause":"NodeRegistered","start":"2026-07-01T11:55:00Z","ready":"20s","sinceCreation":"24s",` +
		`"extensions":[{"name":"gpu"},{"name":"kube-proxy","ready":"9s"}]}}`
	foundRecord = `{"bootID":"boot-1","uid":"uid-n","startup":{"cause":"ControllerStarted","foundAtStart":true,"start":"2026-07-01T11:58:00Z","ready":"5s",` +
		`"extensions":[{"name":"kube-proxy","ready":"5s"}]}}`
	// A newer controller's record: unknown fields in the record and the
	// timeline.
	newerRecord = `{"bootID":"boot-1","uid":"uid-n","v":3,"startup":{"cause":"NodeRebooted","start":"2026-07-01T11:59:00Z","ready":"7s","phases":[1,2],` +
		`"extensions":[{"name":"kube-proxy","ready":"7s","restarts":1}]}}`
	oldRecord = `{"bootID":"boot-1","uid":"uid-n"}`
)

func TestExplainShowsTheStartupTimeline(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{
			name: "a reboot: the timeline earliest first, the last extension and by how much",
			node: node("r1", `[{"name":"kube-proxy"}]`, bootRecord(rebootRecord, "boot-2")),
			want: []string{
				"Start-up timeline (the controller's clock, from when it observed the cause at 2026-07-01T11:50:00Z):\n" +
					"  +0s    reboot observed\n" +
					"         (2 faster extensions not recorded, each ready no later than the ones below)\n" +
					"  +3.4s  csi: first ready renewal\n" +
					"  +12s   kube-proxy: first ready renewal\n" +
					"  +38s   cni: first ready renewal (the last, 26s after kube-proxy)\n" +
					"  +41s   ungated\n" +
					"cni was the last extension to become ready, 26s after kube-proxy; the node was ungated 41s after the start.",
			},
		},
		{
			name: "a new node: the creation delay on the API server's clock, an extension that failed open",
			node: node("c1", `[{"name":"kube-proxy"}]`, bootRecord(newNodeRecord, "boot-1")),
			want: []string{
				"  +9s    kube-proxy: first ready renewal\n  +20s   ungated\n  never  gpu: not ready at the ungate (failed open after its startup timeout)",
				"kube-proxy was the only extension to wait for; the node was ungated 20s after the start.",
				"From the Node's creationTimestamp (the API server's clock) to the ungate (the controller's clock): 24s; the controller observed the node about 4s after its creation.",
			},
		},
		{
			name: "found at the controller's start",
			node: node("f1", `[{"name":"kube-proxy"}]`, bootRecord(foundRecord, "boot-1")),
			want: []string{"controller started, found the node gated", "the start-up itself began earlier"},
		},
		{
			name: "the timeline of the boot before",
			node: node("p1", `[{"name":"kube-proxy"}]`, bootRecord(rebootRecord, "boot-3"), tainted(corev1.TaintEffectNoSchedule),
				condition(corev1.ConditionFalse, "NodeRebooted", "")),
			want: []string{"The node rebooted or was re-created since its last recorded start-up and is starting up now (its timeline is recorded when it is ungated); the start-up before was:"},
		},
		{
			name: "a record from a newer controller",
			node: node("v1", `[{"name":"kube-proxy"}]`, bootRecord(newerRecord, "boot-1")),
			want: []string{"  +7s  kube-proxy: first ready renewal\n  +7s  ungated"},
		},
		{
			name: "a record from an older controller",
			node: node("o1", `[{"name":"kube-proxy"}]`, bootRecord(oldRecord, "boot-1")),
			want: []string{"No start-up timeline is recorded on the node (annotation nodehealth.io/boot)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, fake.NewClientset(tc.node), "explain", tc.node.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks\n%s\nin:\n%s", w, out)
				}
			}
		})
	}
}

func startupFixture() *fake.Clientset {
	return fake.NewClientset(
		node("c1", "", bootRecord(newNodeRecord, "boot-1")),
		node("r1", "", bootRecord(rebootRecord, "boot-2")),
		node("f1", "", bootRecord(foundRecord, "boot-1")),
		node("p1", "", bootRecord(rebootRecord, "boot-3")),
		node("o1", "", bootRecord(oldRecord, "boot-1")),
		node("x1", ""),
	)
}

func TestStatusStartupListsTheSlowestFirst(t *testing.T) {
	out, err := run(t, startupFixture(), "status", "--startup")
	if err != nil {
		t.Fatal(err)
	}
	want := `NODE   CAUSE               READY   SLOWEST       NEXT            SINCE CREATION   STARTED   NOTE
p1     NodeRebooted        41s     cni 38s       kube-proxy 12s   -                10m ago   earlier boot
r1     NodeRebooted        41s     cni 38s       kube-proxy 12s   -                10m ago   -
c1     NodeRegistered      20s     gpu never       kube-proxy 9s    24s              5m ago    -
f1     ControllerStarted   5s      kube-proxy 5s   -                -                2m ago    found at controller start
2 nodes without a start-up timeline: o1, x1.
`
	if got, w := fields(out), fields(want); got != w {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// fields compares tables by their cells, not their padding.
func fields(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

func TestStatusStartupJSON(t *testing.T) {
	out, err := run(t, startupFixture(), "status", "--startup", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var report StartupReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if report.Kind != "NodeStartupReport" || report.APIVersion != ReportAPIVersion || report.Note == "" {
		t.Errorf("report header: %+v", report.TypeMeta)
	}
	var names []string
	for _, n := range report.Nodes {
		names = append(names, n.Node)
	}
	if got := strings.Join(names, ","); got != "p1,r1,c1,f1" {
		t.Errorf("nodes %s, want the slowest first: p1,r1,c1,f1", got)
	}
	if report.Nodes[0].Current || !report.Nodes[1].Current {
		t.Errorf("current: %+v", report.Nodes[:2])
	}
	if strings.Join(report.WithoutTimeline, ",") != "o1,x1" {
		t.Errorf("without timeline: %v", report.WithoutTimeline)
	}
	for _, key := range []string{`"ready": "41.2s"`, `"sinceCreation": "24s"`, `"foundAtStart": true`, `"current": false`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s:\n%s", key, out)
		}
	}
}

// status -o json carries the timeline too.
func TestStatusJSONCarriesTheStartup(t *testing.T) {
	out, err := run(t, startupFixture(), "status", "r1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"startup": {`) || !strings.Contains(out, `"cause": "NodeRebooted"`) {
		t.Errorf("no startup in:\n%s", out)
	}
}
