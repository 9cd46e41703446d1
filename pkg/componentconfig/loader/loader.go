// Package loader reads nodehealth configuration files: strict decoding,
// defaulting and conversion to the internal type, relative path resolution,
// and error messages short enough for a single log line.
package loader

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
	"nodehealth.io/nodehealth/pkg/componentconfig/config/scheme"
)

// Kind tells the loader which configuration Kind a binary takes.
type Kind[T runtime.Object] struct {
	// Name is the Kind, e.g. NodeHealthControllerConfiguration.
	Name string
	// PathRefs returns the path fields of a configuration (see
	// config.*PathRefs).
	PathRefs func(T) []*string
}

// LoadFile reads, strictly decodes, defaults and converts the file at path,
// and resolves relative paths in it against the file's folder. It also returns
// the bytes it decoded, so that a file watcher can tell later whether the file
// changed.
func LoadFile[T runtime.Object](kind Kind[T], path string) (T, []byte, error) {
	var zero T
	info, err := os.Stat(path)
	if err != nil {
		return zero, nil, fmt.Errorf("config file %q: %w", path, unwrapPathError(err))
	}
	if info.IsDir() {
		return zero, nil, fmt.Errorf("config file %q is a directory, not a file", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, nil, fmt.Errorf("config file %q: %w", path, unwrapPathError(err))
	}
	cfg, err := LoadData(kind, path, data)
	return cfg, data, err
}

// LoadData is LoadFile for content already read from path (the file watcher
// reads the file itself to compare it with what is running).
func LoadData[T runtime.Object](kind Kind[T], path string, data []byte) (T, error) {
	var zero T
	cfg, err := Decode(kind, data)
	if err != nil {
		return zero, fmt.Errorf("config file %q: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return zero, fmt.Errorf("config file %q: %w", path, err)
	}
	ResolvePaths(kind.PathRefs(cfg), dir)
	return cfg, nil
}

// ResolvePaths makes the relative paths among paths absolute by joining them
// to root. Empty paths mean "not set" and absolute paths are already
// resolved; both are left alone.
func ResolvePaths(paths []*string, root string) {
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(root, *p)
		}
	}
}

// Decode strictly decodes data (YAML or JSON) holding kind, defaulting it and
// converting it to the internal type T. Errors are rewritten into one short
// sentence that names the offending field or key, never the whole document.
func Decode[T runtime.Object](kind Kind[T], data []byte) (T, error) {
	var zero T
	if len(bytes.TrimSpace(data)) == 0 {
		return zero, errors.New("the file is empty; it must hold a " + kind.Name + " of " + configv1alpha1.SchemeGroupVersion.String())
	}
	// The UniversalDecoder decodes any registered version, runs defaulting
	// and converts to the internal version.
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		// The strict decoder returns the object *and* a strict error; the
		// object must never be used then, or a typo would be dropped
		// silently. IsStrictDecodingError is a type assertion, so it is
		// checked before anything wraps err.
		return zero, describeDecodeError(kind, data, err)
	}
	cfg, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("kind %q is not what this binary takes; want kind %q (apiVersion %s)",
			gvk.Kind, kind.Name, configv1alpha1.SchemeGroupVersion)
	}
	// Conversion to the internal version clears TypeMeta; keep the version
	// the file was written in, for logs and for --write-config-to.
	cfg.GetObjectKind().SetGroupVersionKind(*gvk)
	return cfg, nil
}

var whitespace = regexp.MustCompile(`\s+`)

func describeDecodeError[T runtime.Object](kind Kind[T], data []byte, err error) error {
	want := fmt.Sprintf("apiVersion %s, kind %s", configv1alpha1.SchemeGroupVersion, kind.Name)
	if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
		var msgs []string
		for _, e := range strictErr.Errors() {
			msgs = append(msgs, oneLine(e.Error()))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	switch {
	case runtime.IsMissingVersion(err):
		// The apimachinery message echoes the whole document.
		return fmt.Errorf("apiVersion is missing; want %s", want)
	case runtime.IsMissingKind(err):
		return fmt.Errorf("kind is missing; want %s", want)
	case runtime.IsNotRegisteredError(err):
		// Tell the user what the file said and what would be accepted
		// instead of listing the scheme's Go types.
		typeMeta := peekTypeMeta(data)
		return fmt.Errorf("apiVersion %q with kind %q is not known; want %s", typeMeta.GroupVersion().String(), typeMeta.Kind, want)
	}
	return errors.New(oneLine(trimJSONNoise(err.Error())))
}

// peekTypeMeta reads apiVersion and kind without caring about the rest.
func peekTypeMeta(data []byte) schema.GroupVersionKind {
	_, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, &runtime.Unknown{})
	if gvk != nil {
		return *gvk
	}
	_ = err
	return schema.GroupVersionKind{}
}

// trimJSONNoise shortens the standard library's messages about Go types
// ("json: cannot unmarshal string into Go struct field
// NodeHealthControllerConfiguration.workers of type int32") to the field path
// a user wrote.
func trimJSONNoise(msg string) string {
	msg = strings.TrimPrefix(msg, "couldn't get version/kind; json parse error: ")
	if i := strings.Index(msg, "Go struct field "); i >= 0 {
		rest := msg[i+len("Go struct field "):]
		// Drop the Go type name before the first dot: the user knows the
		// Kind, and the JSON path after it is what they wrote.
		if dot := strings.Index(rest, "."); dot >= 0 {
			rest = rest[dot+1:]
		}
		msg = msg[:i] + "field " + rest
	}
	return msg
}

func oneLine(s string) string {
	return strings.TrimSpace(whitespace.ReplaceAllString(s, " "))
}

func unwrapPathError(err error) error {
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	return err
}

// EncodeYAML encodes an internal configuration as YAML in its external
// version v1alpha1, which is what --write-config-to prints.
func EncodeYAML(obj runtime.Object) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return nil, errors.New("no YAML serializer registered")
	}
	encoder := scheme.Codecs.EncoderForVersion(info.Serializer, configv1alpha1.SchemeGroupVersion)
	var buf bytes.Buffer
	if err := encoder.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
