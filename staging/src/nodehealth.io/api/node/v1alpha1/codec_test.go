package v1alpha1

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const testNS = DefaultLeaseNamespace

func boolPtr(b bool) *bool { return &b }

func TestDecodeSystemExtensions(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []SystemExtension
		wantErr string // substring of the error; empty means success
	}{
		{name: "empty value is an empty list", value: "", want: nil},
		{name: "blank value is an empty list", value: "  \n", want: nil},
		{name: "empty array", value: "[]", want: []SystemExtension{}},
		{
			name:  "design example",
			value: `[{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"gpu","affectsReadiness":false}]`,
			want: []SystemExtension{
				{Name: "kube-proxy", Source: "rule/kube-proxy"},
				{Name: "gpu", AffectsReadiness: boolPtr(false)},
			},
		},
		{
			name:  "explicit lease in the extension namespace",
			value: `[{"name":"csi","lease":{"namespace":"node-extension-lease","name":"ebs-csi.n1"},"source":"lease"}]`,
			want: []SystemExtension{
				{Name: "csi", Lease: &LeaseReference{Namespace: testNS, Name: "ebs-csi.n1"}, Source: "lease"},
			},
		},
		{name: "unknown key", value: `[{"name":"a","affects":false}]`, wantErr: `unknown field "[0].affects"`},
		{name: "wrong-case key is unknown", value: `[{"Name":"a"}]`, wantErr: `unknown field "[0].Name"`},
		{name: "duplicate key", value: `[{"name":"a","name":"b"}]`, wantErr: `duplicate field "[0].name"`},
		{name: "duplicate extension names", value: `[{"name":"a"},{"name":"a"}]`, wantErr: `[1].name: Duplicate value: "a"`},
		{name: "missing name", value: `[{"source":"lease"}]`, wantErr: "[0].name: Required value"},
		{name: "dotted name", value: `[{"name":"kube.proxy"}]`, wantErr: `[0].name: Invalid value: "kube.proxy"`},
		{name: "upper-case name", value: `[{"name":"KubeProxy"}]`, wantErr: `[0].name: Invalid value: "KubeProxy"`},
		{name: "null document", value: `null`, wantErr: "must hold a JSON array"},
		{name: "object instead of array", value: `{"name":"a"}`, wantErr: "must hold a JSON array"},
		{name: "null entry", value: `[null]`, wantErr: "[0]: must be an object"},
		{name: "string entry", value: `["kube-proxy"]`, wantErr: "[0]: must be an object"},
		{name: "not JSON", value: `[{"name":`, wantErr: "not valid JSON"},
		{name: "wrong type", value: `[{"name":"a","affectsReadiness":"no"}]`, wantErr: "not valid JSON"},
		{
			name:    "lease outside the extension namespace",
			value:   `[{"name":"a","lease":{"namespace":"kube-system","name":"a.n1"}}]`,
			wantErr: `[0].lease.namespace: Unsupported value: "kube-system"`,
		},
		{name: "lease without namespace", value: `[{"name":"a","lease":{"name":"a.n1"}}]`, wantErr: "[0].lease.namespace: Required value"},
		{name: "lease without name", value: `[{"name":"a","lease":{"namespace":"node-extension-lease"}}]`, wantErr: "[0].lease.name: Required value"},
		{name: "unknown source", value: `[{"name":"a","source":"helm"}]`, wantErr: `[0].source: Invalid value: "helm"`},
		{name: "rule source without a rule name", value: `[{"name":"a","source":"rule/"}]`, wantErr: `[0].source: Invalid value: "rule/"`},
		{name: "too many entries", value: listOf(MaxSystemExtensions + 1), wantErr: "must have at most 64 items"},
		{name: "exactly the maximum", value: listOf(MaxSystemExtensions), want: namesOf(MaxSystemExtensions)},
		{name: "too large", value: "[" + strings.Repeat(" ", MaxSystemExtensionsAnnotationBytes) + "]", wantErr: "more than the limit of 32768"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeSystemExtensions(tc.value, testNS)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("expected an error containing %q, got list %+v", tc.wantErr, got)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), SystemExtensionsAnnotation) {
					t.Errorf("error %q does not name the annotation", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func listOf(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`{"name":"ext-%03d"}`, i)
	}
	return "[" + strings.Join(entries, ",") + "]"
}

func namesOf(n int) []SystemExtension {
	out := make([]SystemExtension, n)
	for i := range out {
		out[i] = SystemExtension{Name: fmt.Sprintf("ext-%03d", i)}
	}
	return out
}

func TestEncodeSystemExtensions(t *testing.T) {
	tests := []struct {
		name    string
		list    []SystemExtension
		want    string
		wantErr string
	}{
		{name: "nil list", list: nil, want: "[]"},
		{
			name: "sorted by name",
			list: []SystemExtension{{Name: "kube-proxy"}, {Name: "cni"}, {Name: "csi"}},
			want: `[{"name":"cni"},{"name":"csi"},{"name":"kube-proxy"}]`,
		},
		{
			name: "defaulted fields left out",
			list: []SystemExtension{
				{Name: "kube-proxy", AffectsReadiness: boolPtr(true), Lease: &LeaseReference{Namespace: testNS, Name: "kube-proxy.n1"}},
			},
			want: `[{"name":"kube-proxy"}]`,
		},
		{
			name: "non-default fields kept",
			list: []SystemExtension{
				{Name: "gpu", AffectsReadiness: boolPtr(false), Source: "rule/gpu-nodes"},
				{Name: "csi", Lease: &LeaseReference{Namespace: testNS, Name: "ebs-csi.n1"}, Source: SourceLease},
			},
			want: `[{"name":"csi","lease":{"namespace":"node-extension-lease","name":"ebs-csi.n1"},"source":"lease"},` +
				`{"name":"gpu","affectsReadiness":false,"source":"rule/gpu-nodes"}]`,
		},
		{
			name: "another node's default lease is not a default here",
			list: []SystemExtension{{Name: "kube-proxy", Lease: &LeaseReference{Namespace: testNS, Name: "kube-proxy.n2"}}},
			want: `[{"name":"kube-proxy","lease":{"namespace":"node-extension-lease","name":"kube-proxy.n2"}}]`,
		},
		{name: "invalid list refused", list: []SystemExtension{{Name: "a"}, {Name: "a"}}, wantErr: "Duplicate value"},
		{name: "oversized list refused", list: namesOf(MaxSystemExtensions + 1), wantErr: "at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopyList(tc.list)
			got, err := EncodeSystemExtensions(tc.list, "n1", testNS)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("expected error containing %q, got %v (value %q)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !reflect.DeepEqual(tc.list, before) {
				t.Errorf("the input list was modified: %+v", tc.list)
			}
			// What is written must read back as the same list.
			back, err := DecodeSystemExtensions(got, testNS)
			if err != nil {
				t.Fatalf("encoded value does not decode: %v", err)
			}
			if !reflect.DeepEqual(NormalizeSystemExtensions(back, "n1", testNS), NormalizeSystemExtensions(tc.list, "n1", testNS)) {
				t.Fatalf("round trip changed the list: %+v -> %+v", tc.list, back)
			}
		})
	}
}

func TestEncodeSystemExtensionsIsStable(t *testing.T) {
	a := []SystemExtension{{Name: "b", AffectsReadiness: boolPtr(true)}, {Name: "a"}}
	b := []SystemExtension{{Name: "a", Lease: &LeaseReference{Namespace: testNS, Name: "a.n1"}}, {Name: "b"}}
	ea, err := EncodeSystemExtensions(a, "n1", testNS)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := EncodeSystemExtensions(b, "n1", testNS)
	if err != nil {
		t.Fatal(err)
	}
	if ea != eb {
		t.Fatalf("two lists that mean the same encode differently: %s vs %s", ea, eb)
	}
}

func TestSystemExtensionDefaults(t *testing.T) {
	e := SystemExtension{Name: "kube-proxy"}
	if !e.ReadinessAffected() {
		t.Error("affectsReadiness must default to true")
	}
	if got, want := e.LeaseFor("n1", testNS), (LeaseReference{Namespace: testNS, Name: "kube-proxy.n1"}); got != want {
		t.Errorf("default lease: got %v, want %v", got, want)
	}
	e.AffectsReadiness = boolPtr(false)
	e.Lease = &LeaseReference{Namespace: testNS, Name: "other"}
	if e.ReadinessAffected() {
		t.Error("affectsReadiness false must be honoured")
	}
	if got := e.LeaseFor("n1", testNS).String(); got != testNS+"/other" {
		t.Errorf("explicit lease: got %s", got)
	}
}

func TestARulesEventSourceNamesTheRuleAndOnlyThat(t *testing.T) {
	if got := RuleSource("kube-proxy"); got != "rule/kube-proxy" {
		t.Errorf("RuleSource: got %q", got)
	}
	if rule, ok := RuleFromSource("rule/kube-proxy"); !ok || rule != "kube-proxy" {
		t.Errorf("RuleFromSource(rule/kube-proxy) = %q, %v", rule, ok)
	}
	for _, s := range []string{"", "lease", "rules/x"} {
		if _, ok := RuleFromSource(s); ok {
			t.Errorf("RuleFromSource(%q) must not name a rule", s)
		}
	}
}

func deepCopyList(in []SystemExtension) []SystemExtension {
	if in == nil {
		return nil
	}
	out := make([]SystemExtension, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// FuzzDecodeSystemExtensions checks that the decoder never panics and that
// whatever it accepts is valid and survives encode → decode unchanged, with
// encoding stable (encoding the decoded value again gives the same bytes).
func FuzzDecodeSystemExtensions(f *testing.F) {
	for _, seed := range []string{
		``, `[]`, `null`, `[null]`, `{}`,
		`[{"name":"kube-proxy","source":"rule/kube-proxy"},{"name":"gpu","affectsReadiness":false}]`,
		`[{"name":"csi","lease":{"namespace":"node-extension-lease","name":"ebs-csi.n1"},"source":"lease"}]`,
		`[{"name":"a","name":"b"}]`, `[{"Name":"a"}]`, `[{"name":"a"},{"name":"a"}]`,
		`[{"name":"a","affectsReadiness":true,"lease":{"namespace":"node-extension-lease","name":"a.n1"}}]`,
		listOf(3),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		list, err := DecodeSystemExtensions(value, testNS)
		if err != nil {
			return
		}
		if errs := ValidateSystemExtensions(list, testNS); len(errs) > 0 {
			t.Fatalf("decoder accepted an invalid list %q: %v", value, errs)
		}
		encoded, err := EncodeSystemExtensions(list, "n1", testNS)
		if err != nil {
			t.Fatalf("accepted list %q does not encode: %v", value, err)
		}
		back, err := DecodeSystemExtensions(encoded, testNS)
		if err != nil {
			t.Fatalf("encoded value %q does not decode: %v", encoded, err)
		}
		if !reflect.DeepEqual(NormalizeSystemExtensions(back, "n1", testNS), NormalizeSystemExtensions(list, "n1", testNS)) {
			t.Fatalf("round trip changed %q into %q", value, encoded)
		}
		again, err := EncodeSystemExtensions(back, "n1", testNS)
		if err != nil || again != encoded {
			t.Fatalf("encoding is not stable: %q then %q (%v)", encoded, again, err)
		}
	})
}
