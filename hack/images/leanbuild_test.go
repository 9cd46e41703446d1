package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadLeanBuild(t *testing.T) {
	lean, ok, err := LoadLeanBuild("../..", "extension-heartbeat")
	if err != nil || !ok {
		t.Fatalf("extension-heartbeat: ok=%v err=%v, want its lean build", ok, err)
	}
	// The tags the lean build's source files are constrained by
	// (cmd/extension-heartbeat, pkg/probe, pkg/process).
	for _, tag := range []string{"nogrpcprobe", "noprofiling"} {
		if !strings.Contains(","+lean.Tags+",", ","+tag+",") {
			t.Errorf("tags %q lack %s", lean.Tags, tag)
		}
	}
	if lean.Full != "extension-heartbeat-grpc" || len(lean.GCFlags) == 0 {
		t.Errorf("full build %q, gcflags %q; want extension-heartbeat-grpc and the file's patterns", lean.Full, lean.GCFlags)
	}
	if _, ok, err := LoadLeanBuild("../..", "update-agent"); ok || err != nil {
		t.Errorf("update-agent: ok=%v err=%v, want not lean", ok, err)
	}

	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	for content, want := range map[string]string{
		"tags=a\nbogus\n":      `heartbeat-lean.conf:2: want key=value, got "bogus"`,
		"tags=a\ngcflag=-l\n":  `heartbeat-lean.conf:2: unknown key "gcflag"`,
		"# only\ngcflags=-l\n": "heartbeat-lean.conf: no tags= line",
	} {
		if err := os.WriteFile(filepath.Join(root, LeanBuildFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadLeanBuild(root, "extension-heartbeat"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", content, err, want)
		}
	}
}
