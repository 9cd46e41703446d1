package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or replaces) every CustomResourceDefinition in the
// repository's deploy/crds folder — the files controller-gen writes — and waits
// until the API server serves them. The dynamic client keeps
// k8s.io/apiextensions-apiserver out of the product's go.mod.
func (e *Environment) InstallCRDs(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s; run make generate", filepath.Join(root, "deploy", "crds"))
	}
	sort.Strings(files)
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	crds := dyn.Resource(crdResource)
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue // kustomize's list of the CRDs, not a CRD
		}
		objs, err := readUnstructured(f)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := applyCRD(ctx, crds, obj); err != nil {
				return fmt.Errorf("installing %s from %s: %w", obj.GetName(), f, err)
			}
			if err := waitEstablished(ctx, crds, obj.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

func readUnstructured(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func applyCRD(ctx context.Context, crds dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) error {
	_, err := crds.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

func waitEstablished(ctx context.Context, crds dynamic.NamespaceableResourceInterface, name string) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
	}
	return nil
}
