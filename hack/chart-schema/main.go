// Command chart-schema writes the Helm chart's values.schema.json: the
// hand-written schema of the chart's own values (values.schema.base.json
// beside this file) completed with one definition per configuration Kind,
// derived by reflection from the external configuration types of
// nodehealth.io/api/config/v1alpha1. The configuration objects in values
// (controller.config, updateOperator.config, ...) are those Kinds, so the
// schema rejects a misspelt or unknown configuration field at `helm install`
// time with the same field names the binaries read, and it cannot drift from
// the Go types: hack/update-chart.sh runs this and make verify checks the
// result.
//
// Usage: go run ./hack/chart-schema BASE_SCHEMA OUTPUT
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "nodehealth.io/api/config/v1alpha1"
)

var kinds = []runtime.Object{
	&configv1alpha1.NodeHealthControllerConfiguration{},
	&configv1alpha1.ExtensionHeartbeatConfiguration{},
	&configv1alpha1.UpdateOperatorConfiguration{},
	&configv1alpha1.UpdateAgentConfiguration{},
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: chart-schema BASE_SCHEMA OUTPUT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(basePath, outPath string) error {
	data, err := os.ReadFile(basePath)
	if err != nil {
		return err
	}
	var base map[string]any
	if err := json.Unmarshal(data, &base); err != nil {
		return fmt.Errorf("%s: %w", basePath, err)
	}
	defs, _ := base["$defs"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
	}
	for _, obj := range kinds {
		t := reflect.TypeOf(obj).Elem()
		s, err := kindSchema(t)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name(), err)
		}
		defs[t.Name()] = s
	}
	base["$defs"] = defs
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(base); err != nil {
		return err
	}
	return os.WriteFile(outPath, out.Bytes(), 0o644)
}

// kindSchema is the schema of one configuration Kind. apiVersion and kind
// may be left out in values (the chart writes them), but if given must be
// the Kind's own.
func kindSchema(t reflect.Type) (map[string]any, error) {
	s, err := schemaOf(t, nil)
	if err != nil {
		return nil, err
	}
	props := s["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"const": configv1alpha1.SchemeGroupVersion.String()}
	props["kind"] = map[string]any{"const": t.Name()}
	s["description"] = fmt.Sprintf("A %s (%s): every field is described in docs/config/%s.md. Rendered into the component's --config file.",
		t.Name(), configv1alpha1.SchemeGroupVersion, t.Name())
	return s, nil
}

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// schemaOf maps a Go type to the JSON schema of its encoding/json form.
// seen guards against recursive types.
func schemaOf(t reflect.Type, seen []reflect.Type) (map[string]any, error) {
	for _, s := range seen {
		if s == t {
			return nil, fmt.Errorf("recursive type %s", t)
		}
	}
	switch {
	case t == reflect.TypeOf(metav1.Duration{}) || t.Name() == "TimeOrMetaDuration":
		return map[string]any{"type": "string", "description": "a duration such as 30s or 5m"}, nil
	case t.Name() == "QuantityValue" || t.Name() == "Quantity" || t.Name() == "IntOrString":
		return map[string]any{"type": []any{"string", "integer"}}, nil
	case t.Kind() != reflect.Pointer && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)):
		return nil, fmt.Errorf("type %s has its own JSON form; add it to chart-schema", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		s, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Slice:
		items, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": []any{"array", "null"}, "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %s", t.Key())
		}
		vals, err := schemaOf(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": vals}, nil
	case reflect.Struct:
		props := map[string]any{}
		if err := fields(t, props, append(seen, t)); err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}, nil
	}
	return nil, fmt.Errorf("unsupported type %s (%s)", t, t.Kind())
}

// fields adds the JSON fields of struct t to props, flattening inlined and
// embedded structs as encoding/json does.
func fields(t reflect.Type, props map[string]any, seen []reflect.Type) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := fields(ft, props, seen); err != nil {
					return err
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s, err := schemaOf(f.Type, seen)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props[name] = s
	}
	return nil
}

// nullable lets a pointer field be written as null (YAML `field:` with no
// value), which the binaries read as unset.
func nullable(s map[string]any) map[string]any {
	switch ty := s["type"].(type) {
	case string:
		s["type"] = []any{ty, "null"}
	case []any:
		for _, x := range ty {
			if x == "null" {
				return s
			}
		}
		s["type"] = append(ty, "null")
	}
	return s
}
