package test

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// operatorPod is what the checks read of the update operator's Deployment.
type operatorPod struct {
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name         string `json:"name"`
					VolumeMounts []struct {
						Name      string `json:"name"`
						MountPath string `json:"mountPath"`
						SubPath   string `json:"subPath"`
						ReadOnly  bool   `json:"readOnly"`
					} `json:"volumeMounts"`
				} `json:"containers"`
				Volumes []struct {
					Name   string `json:"name"`
					Secret *struct {
						SecretName string `json:"secretName"`
					} `json:"secret"`
					ConfigMap *struct {
						Name string `json:"name"`
					} `json:"configMap"`
				} `json:"volumes"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// mountedFile is a file of a Secret or a ConfigMap in the operator's
// container.
type mountedFile struct {
	kind, object, key string
}

// alertSourceFiles renders vals and returns, for each caFile and
// bearerTokenFile of the operator's rendered alertSources, the Secret or
// ConfigMap key the container reads it from; a path no read-only
// mount of a whole object serves fails the test.
func alertSourceFiles(t *testing.T, vals map[string]any) map[string]mountedFile {
	t.Helper()
	out, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	var pod operatorPod
	if err := yaml.Unmarshal([]byte(docOf(out, "kind: Deployment\nmetadata:\n  name: update-operator\n")), &pod); err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(docOf(out, "kind: ConfigMap\nmetadata:\n  name: update-operator-config\n")), &cm); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		AlertSources []struct {
			Name            string `json:"name"`
			CAFile          string `json:"caFile"`
			BearerTokenFile string `json:"bearerTokenFile"`
		} `json:"alertSources"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.AlertSources) == 0 {
		t.Fatal("the rendered configuration has no alertSources")
	}
	spec := pod.Spec.Template.Spec
	files := map[string]mountedFile{}
	for _, s := range cfg.AlertSources {
		for _, file := range []string{s.CAFile, s.BearerTokenFile} {
			if file == "" {
				continue
			}
			var found *mountedFile
			for _, m := range spec.Containers[0].VolumeMounts {
				dir := strings.TrimSuffix(m.MountPath, "/") + "/"
				if !strings.HasPrefix(file, dir) {
					continue
				}
				if !m.ReadOnly || m.SubPath != "" {
					t.Errorf("%s: mount %s is not a read-only mount of a whole object (readOnly %v, subPath %q)", file, m.Name, m.ReadOnly, m.SubPath)
				}
				for _, v := range spec.Volumes {
					switch {
					case v.Name != m.Name:
					case v.Secret != nil:
						found = &mountedFile{"Secret", v.Secret.SecretName, strings.TrimPrefix(file, dir)}
					case v.ConfigMap != nil:
						found = &mountedFile{"ConfigMap", v.ConfigMap.Name, strings.TrimPrefix(file, dir)}
					}
				}
			}
			if found == nil || found.object == "update-operator-config" {
				t.Errorf("alert source %s: %s is in no Secret or ConfigMap the chart mounts for it", s.Name, file)
				continue
			}
			files[file] = *found
		}
	}
	return files
}

// TestTheDocumentedAlertSourceValuesMountTheFilesTheirConfigurationNames:
// docs/updater.md's values (the yaml block of "Alerts" that sets
// updateOperator.mounts) render an operator whose caFile and
// bearerTokenFile are keys of the Secret its kubectl command creates.
func TestTheDocumentedAlertSourceValuesMountTheFilesTheirConfigurationNames(t *testing.T) {
	doc, err := os.ReadFile(path.Join(deployDir, "..", "docs", "updater.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	if i := strings.Index(section, "\n### Alerts\n"); i >= 0 {
		section = section[i:]
	}
	values := regexp.MustCompile("(?s)```yaml\n(# nodehealth-values.yaml\nupdateOperator:\n.*?)```").FindStringSubmatch(section)
	create := regexp.MustCompile(`kubectl -n nodehealth-system create secret generic (\S+)((?: \\\n)?(?:\s+--from-file=\S+)+)`).FindStringSubmatch(section)
	if values == nil || create == nil {
		t.Fatal(`docs/updater.md's "Alerts" has no values block starting "# nodehealth-values.yaml" or no kubectl create secret command`)
	}
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`--from-file=([^=\s]+)=`).FindAllStringSubmatch(create[2], -1) {
		keys[m[1]] = true
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values[1]), &vals); err != nil {
		t.Fatal(err)
	}
	files := alertSourceFiles(t, vals)
	if len(files) != 2 {
		t.Errorf("files %v, want the CA and the token", files)
	}
	for file, m := range files {
		if m.kind != "Secret" || m.object != create[1] || !keys[m.key] {
			t.Errorf("%s is key %s of %s %s; the documented command creates Secret %s with keys %v", file, m.key, m.kind, m.object, create[1], keys)
		}
	}
}

// TestTheFullValuesMountTheAlertSourcesFilesFromASecretAndAConfigMap: the
// full render (applied to a real control plane by test/integration/chart)
// reads the token from a Secret and the CA from a ConfigMap.
func TestTheFullValuesMountTheAlertSourcesFilesFromASecretAndAConfigMap(t *testing.T) {
	files := alertSourceFiles(t, valuesFile(t, "testdata/full-values.yaml"))
	want := map[string]mountedFile{
		"/etc/update-operator/ca/ca.crt":          {"ConfigMap", "alertmanager-ca", "ca.crt"},
		"/etc/update-operator/alertmanager/token": {"Secret", "alertmanager-client", "token"},
	}
	for f, m := range want {
		if files[f] != m {
			t.Errorf("%s: %+v, want %+v", f, files[f], m)
		}
	}
}
