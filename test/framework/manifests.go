package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// DecodeManifests decodes a multi-document YAML stream (the output of
// "kubectl kustomize") into typed objects of the client-go scheme, strictly: a
// field the scheme does not know, or a kind it does not know, is an error, so
// a typo in a shipped manifest fails the test that renders it.
func DecodeManifests(manifests string) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	decoder := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		serializerjson.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding manifest: %w\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
}
