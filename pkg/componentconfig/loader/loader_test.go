package loader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/componentconfig/loader"
)

var controllerKind = loader.Kind[*config.NodeHealthControllerConfiguration]{
	Name:     "NodeHealthControllerConfiguration",
	PathRefs: config.NodeHealthControllerConfigurationPathRefs,
}

var heartbeatKind = loader.Kind[*config.ExtensionHeartbeatConfiguration]{
	Name:     "ExtensionHeartbeatConfiguration",
	PathRefs: config.ExtensionHeartbeatConfigurationPathRefs,
}

const header = "apiVersion: config.nodehealth.io/v1alpha1\nkind: NodeHealthControllerConfiguration\n"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		// wantAll must all appear in the error.
		wantAll []string
	}{
		{name: "unknown field", file: "c.yaml", content: header + "workerz: 3\n",
			wantAll: []string{`unknown field "workerz"`, "c.yaml"}},
		{name: "unknown nested field", file: "c.yaml", content: header + "eviction:\n  timout: 1m\n",
			wantAll: []string{`unknown field "eviction.timout"`}},
		{name: "wrong case key", file: "c.yaml", content: header + "Workers: 3\n",
			wantAll: []string{`unknown field "Workers"`}},
		{name: "duplicate key", file: "c.yaml", content: header + "workers: 3\nworkers: 4\n",
			wantAll: []string{`"workers" already set`}},
		{name: "duplicate key JSON", file: "c.json", content: `{"apiVersion":"config.nodehealth.io/v1alpha1","kind":"NodeHealthControllerConfiguration","workers":1,"workers":2}`,
			wantAll: []string{`duplicate field "workers"`}},
		{name: "wrong apiVersion", file: "c.yaml", content: "apiVersion: config.nodehealth.io/v1\nkind: NodeHealthControllerConfiguration\n",
			wantAll: []string{`apiVersion "config.nodehealth.io/v1"`, "want apiVersion config.nodehealth.io/v1alpha1, kind NodeHealthControllerConfiguration"}},
		{name: "unknown kind", file: "c.yaml", content: "apiVersion: config.nodehealth.io/v1alpha1\nkind: KubeletConfiguration\n",
			wantAll: []string{`kind "KubeletConfiguration" is not known`}},
		{name: "another binary's kind", file: "c.yaml", content: "apiVersion: config.nodehealth.io/v1alpha1\nkind: UpdateAgentConfiguration\n",
			wantAll: []string{`kind "UpdateAgentConfiguration" is not what this binary takes`, `want kind "NodeHealthControllerConfiguration"`}},
		{name: "missing apiVersion", file: "c.yaml", content: "kind: NodeHealthControllerConfiguration\nworkers: 3\n",
			wantAll: []string{"apiVersion is missing"}},
		{name: "missing kind", file: "c.yaml", content: "apiVersion: config.nodehealth.io/v1alpha1\n",
			wantAll: []string{"kind is missing"}},
		{name: "wrong type", file: "c.yaml", content: header + "workers: many\n",
			wantAll: []string{"workers", "int32"}},
		{name: "wrong duration type", file: "c.yaml", content: header + "renewalGrace: 5\n",
			wantAll: []string{"renewalGrace"}},
		{name: "not YAML", file: "c.yaml", content: header + "workers: [\n",
			wantAll: []string{"c.yaml"}},
		{name: "empty file", file: "c.yaml", content: "  \n",
			wantAll: []string{"is empty", "NodeHealthControllerConfiguration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content)
			cfg, _, err := loader.LoadFile(controllerKind, path)
			if err == nil {
				t.Fatalf("no error; got %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("a configuration was returned together with the error")
			}
			msg := err.Error()
			for _, want := range tc.wantAll {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			if len(msg) > 300 {
				t.Errorf("error is %d characters long: %q", len(msg), msg)
			}
		})
	}
}

func TestLoadFileMissingAndDirectory(t *testing.T) {
	dir := t.TempDir()
	_, _, err := loader.LoadFile(controllerKind, filepath.Join(dir, "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "no such file") || !strings.Contains(err.Error(), "absent.yaml") {
		t.Errorf("missing file: got %v", err)
	}
	_, _, err = loader.LoadFile(controllerKind, dir)
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: got %v", err)
	}
}

func TestLoadFileYAMLAndJSON(t *testing.T) {
	for name, content := range map[string]string{
		"c.yaml": header + "workers: 3\n",
		"c.json": `{"apiVersion": "config.nodehealth.io/v1alpha1", "kind": "NodeHealthControllerConfiguration", "workers": 3}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, data, err := loader.LoadFile(controllerKind, writeFile(t, name, content))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Workers != 3 {
				t.Errorf("workers = %d, want 3", cfg.Workers)
			}
			// Defaulting ran.
			if cfg.LeaseNamespace != "node-extension-lease" {
				t.Errorf("leaseNamespace = %q, want the default", cfg.LeaseNamespace)
			}
			if got := cfg.APIVersion; got != "config.nodehealth.io/v1alpha1" {
				t.Errorf("apiVersion = %q; conversion must not lose the file's version", got)
			}
			if string(data) != content {
				t.Errorf("returned data differs from the file")
			}
		})
	}
}

func TestRelativePathsResolveAgainstTheConfigurationFilesFolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "heartbeat.yaml")
	content := `apiVersion: config.nodehealth.io/v1alpha1
kind: ExtensionHeartbeatConfiguration
clientConnection:
  kubeconfig: kube/config
extensionName: x
probe:
  http:
    url: https://127.0.0.1/healthz
    caFile: ../ca.pem
`
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loader.LoadFile(heartbeatKind, path)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "kube/config"); cfg.ClientConnection.Kubeconfig != want {
		t.Errorf("kubeconfig = %q, want %q", cfg.ClientConnection.Kubeconfig, want)
	}
	if want := filepath.Join(filepath.Dir(dir), "ca.pem"); cfg.Probe.HTTP.CAFile != want {
		t.Errorf("caFile = %q, want %q", cfg.Probe.HTTP.CAFile, want)
	}

	// Absolute and empty paths stay as they are.
	abs, empty, rel := "/etc/ca.pem", "", "a/b"
	loader.ResolvePaths([]*string{&abs, &empty, &rel}, "/root")
	if abs != "/etc/ca.pem" || empty != "" || rel != "/root/a/b" {
		t.Errorf("got %q %q %q", abs, empty, rel)
	}
}

// A relative --config path resolves the file's relative paths against the
// file's folder, not against the working directory.
func TestResolvePathsRelativeConfigPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "c.yaml"), []byte(header+"clientConnection:\n  kubeconfig: kubeconfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, _, err := loader.LoadFile(controllerKind, "etc/c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "etc", "kubeconfig"); cfg.ClientConnection.Kubeconfig != want {
		t.Errorf("kubeconfig = %q, want %q", cfg.ClientConnection.Kubeconfig, want)
	}
}
