package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
)

func TestALeaseIsNamedExtensionDotNodeWithinTheNameLimit(t *testing.T) {
	tests := []struct {
		extension, node string
		want            string
		wantErr         string
	}{
		{extension: "kube-proxy", node: "n1", want: "kube-proxy.n1"},
		{extension: "kube-proxy", node: "ip-10-0-0-1.eu-west-1.compute.internal", want: "kube-proxy.ip-10-0-0-1.eu-west-1.compute.internal"},
		{extension: "kube.proxy", node: "n1", wantErr: `invalid extension name "kube.proxy"`},
		{extension: "", node: "n1", wantErr: "invalid extension name"},
		{extension: "KubeProxy", node: "n1", wantErr: "invalid extension name"},
		{extension: "kube-proxy", node: "", wantErr: "invalid node name"},
		{extension: "kube-proxy", node: "N1", wantErr: "invalid node name"},
		// 10 + 1 + 242 = 253: the longest name that exists.
		{extension: "kube-proxy", node: longNode(242), want: "kube-proxy." + longNode(242)},
		{extension: "kube-proxy", node: longNode(243), wantErr: "254 characters, more than the limit of 253"},
	}
	for _, tc := range tests {
		t.Run(tc.extension+"/"+tc.node, func(t *testing.T) {
			got, err := LeaseName(tc.extension, tc.node)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("expected error containing %q, got %q, %v", tc.wantErr, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// longNode returns a valid node name of n characters made of dotted labels.
func longNode(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		label := min(n-b.Len(), 63)
		b.WriteString(strings.Repeat("a", label))
	}
	s := b.String()
	if strings.HasSuffix(s, ".") { // never end a DNS name with a dot
		s = s[:len(s)-1] + "b"
	}
	return s
}

func TestParseLeaseName(t *testing.T) {
	tests := []struct {
		name            string
		extension, node string
		wantErr         string
	}{
		{name: "kube-proxy.n1", extension: "kube-proxy", node: "n1"},
		// The split is at the first dot: this Lease belongs to node "b.n1",
		// never to node "n1" (docs/heartbeat.md).
		{name: "kube-proxy.b.n1", extension: "kube-proxy", node: "b.n1"},
		{name: "kube-proxy", wantErr: "not of the form"},
		{name: ".n1", wantErr: "invalid extension"},
		{name: "kube-proxy.", wantErr: "invalid node"},
		{name: "Kube.n1", wantErr: "invalid extension"},
		{name: "kube-proxy.n1..x", wantErr: "invalid node"},
		{name: "nodehealth-controller-canary", wantErr: "not of the form"},
		{name: "a." + strings.Repeat("b", 252), wantErr: "more than the limit of 253"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ext, node, err := ParseLeaseName(tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("expected error containing %q, got (%q, %q, %v)", tc.wantErr, ext, node, err)
				}
				return
			}
			if err != nil || ext != tc.extension || node != tc.node {
				t.Fatalf("got (%q, %q, %v), want (%q, %q)", ext, node, err, tc.extension, tc.node)
			}
		})
	}
}

func TestLeaseLabelsNameTheExtensionAndANodeNameThatFitsALabel(t *testing.T) {
	if got, want := LeaseLabels("kube-proxy", "n1"), map[string]string{ExtensionLabel: "kube-proxy", NodeLabel: "n1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("short node: got %v, want %v", got, want)
	}
	long := longNode(64)
	if got, want := LeaseLabels("kube-proxy", long), map[string]string{ExtensionLabel: "kube-proxy"}; !reflect.DeepEqual(got, want) {
		t.Errorf("node name over 63 characters must not be a label: got %v, want %v", got, want)
	}
	if got := LeaseLabels("kube-proxy", longNode(63)); got[NodeLabel] != longNode(63) {
		t.Errorf("a 63-character node name fits a label: got %v", got)
	}
}

// FuzzParseLeaseName checks that parsing never panics and that every name it
// accepts is exactly the name LeaseName builds from its parts.
func FuzzParseLeaseName(f *testing.F) {
	for _, seed := range []string{"kube-proxy.n1", "kube-proxy.b.n1", "a.b", ".", "a.", ".a", "", "x..y",
		"kube-proxy." + longNode(242), "kube-proxy." + longNode(243), "nodehealth-controller-canary"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ext, node, err := ParseLeaseName(name)
		if err != nil {
			return
		}
		if strings.Contains(ext, ".") {
			t.Fatalf("extension %q of %q holds a dot", ext, name)
		}
		built, err := LeaseName(ext, node)
		if err != nil {
			t.Fatalf("parsed %q into (%q, %q) that LeaseName rejects: %v", name, ext, node, err)
		}
		if built != name {
			t.Fatalf("parsed %q into (%q, %q), which builds %q", name, ext, node, built)
		}
	})
}
