package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// Limits of the SystemExtensions annotation. They keep a Node object, which every
// kubelet, scheduler and controller caches, from growing without bound.
const (
	MaxSystemExtensions                = 64
	MaxSystemExtensionsAnnotationBytes = 32 * 1024
)

// DecodeSystemExtensions parses the value of the nodehealth.io/system-extensions
// annotation strictly: unknown or duplicate keys, keys in the wrong case, null
// entries, duplicate extension names, invalid names, Lease references outside
// namespace (the controller's extension namespace) and oversized lists are
// errors. An empty value means an empty list.
//
// Callers that cannot parse a node's list must not rewrite it: they report it
// and leave the annotation for a person to fix.
func DecodeSystemExtensions(value, namespace string) ([]SystemExtension, error) {
	if len(value) > MaxSystemExtensionsAnnotationBytes {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than the limit of %d",
			SystemExtensionsAnnotation, len(value), MaxSystemExtensionsAnnotationBytes)
	}
	trimmed := bytes.TrimSpace([]byte(value))
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] != '[' {
		return nil, fmt.Errorf("annotation %s must hold a JSON array of extensions, e.g. %s",
			SystemExtensionsAnnotation, `[{"name":"kube-proxy"}]`)
	}
	// Null entries would decode to empty structs and hide what was written.
	var raw []json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return nil, fmt.Errorf("annotation %s is not valid JSON: %w", SystemExtensionsAnnotation, err)
	}
	for i, r := range raw {
		if string(bytes.TrimSpace(r)) == "null" || len(r) == 0 || r[0] != '{' {
			return nil, fmt.Errorf("annotation %s: [%d]: must be an object with a name", SystemExtensionsAnnotation, i)
		}
	}

	var list []SystemExtension
	strictErrs, err := kjson.UnmarshalStrict(trimmed, &list)
	if err != nil {
		return nil, fmt.Errorf("annotation %s is not valid JSON: %w", SystemExtensionsAnnotation, err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("annotation %s: %s", SystemExtensionsAnnotation, strings.Join(msgs, "; "))
	}
	if errs := ValidateSystemExtensions(list, namespace); len(errs) > 0 {
		return nil, fmt.Errorf("annotation %s: %w", SystemExtensionsAnnotation, errs.ToAggregate())
	}
	return list, nil
}

// EncodeSystemExtensions returns the annotation value for list on the given node:
// entries sorted by name, defaulted fields left out (affectsReadiness true, the
// default Lease of the node), so that the same list always encodes to the same
// bytes and writers never produce a diff that means nothing. The list is
// validated first; list itself is not modified.
func EncodeSystemExtensions(list []SystemExtension, node, namespace string) (string, error) {
	if errs := ValidateSystemExtensions(list, namespace); len(errs) > 0 {
		return "", fmt.Errorf("cannot encode annotation %s: %w", SystemExtensionsAnnotation, errs.ToAggregate())
	}
	data, err := json.Marshal(NormalizeSystemExtensions(list, node, namespace))
	if err != nil {
		return "", err
	}
	if len(data) > MaxSystemExtensionsAnnotationBytes {
		return "", fmt.Errorf("cannot encode annotation %s: %d bytes, more than the limit of %d",
			SystemExtensionsAnnotation, len(data), MaxSystemExtensionsAnnotationBytes)
	}
	return string(data), nil
}

// NormalizeSystemExtensions returns a sorted copy of list with defaulted fields
// cleared, the form EncodeSystemExtensions writes. Two lists that mean the same
// normalize to equal values.
func NormalizeSystemExtensions(list []SystemExtension, node, namespace string) []SystemExtension {
	out := make([]SystemExtension, 0, len(list))
	for _, e := range list {
		n := SystemExtension{Name: e.Name, Source: e.Source}
		if e.Lease != nil && *e.Lease != (LeaseReference{Namespace: namespace, Name: e.Name + "." + node}) {
			ref := *e.Lease
			n.Lease = &ref
		}
		if !e.ReadinessAffected() {
			f := false
			n.AffectsReadiness = &f
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidateSystemExtensions checks a list against the rules of the annotation.
// namespace is the controller's extension namespace: the only namespace a Lease
// reference may point into, since the controller watches only that namespace
// and the admission policy guards only that one.
func ValidateSystemExtensions(list []SystemExtension, namespace string) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath(SystemExtensionsAnnotation)
	if len(list) > MaxSystemExtensions {
		errs = append(errs, field.TooMany(root, len(list), MaxSystemExtensions))
	}
	seen := make(map[string]bool, len(list))
	for i := range list {
		e := &list[i]
		p := root.Index(i)
		switch {
		case e.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "every extension needs a name"))
		default:
			for _, msg := range ValidateExtensionName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
			if seen[e.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), e.Name))
			}
			seen[e.Name] = true
		}
		if e.Lease != nil {
			errs = append(errs, validateLeaseReference(*e.Lease, namespace, p.Child("lease"))...)
		}
		errs = append(errs, validateSource(e.Source, p.Child("source"))...)
	}
	return errs
}

func validateLeaseReference(ref LeaseReference, namespace string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case ref.Namespace == "":
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	case ref.Namespace != namespace:
		errs = append(errs, field.NotSupported(p.Child("namespace"), ref.Namespace, []string{namespace}))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateSource(source string, p *field.Path) field.ErrorList {
	switch {
	case source == SourceManual, source == SourceLease:
		return nil
	case strings.HasPrefix(source, SourceRulePrefix):
		var errs field.ErrorList
		for _, msg := range ValidateRuleName(strings.TrimPrefix(source, SourceRulePrefix)) {
			errs = append(errs, field.Invalid(p, source, "rule name: "+msg))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(p, source, `must be empty (manual), "lease" or "rule/<rule name>"`)}
	}
}

// ValidateRuleName checks the name of an extension rule of the controller's
// configuration, as it appears in "rule/<name>". Rule names are DNS labels.
func ValidateRuleName(name string) []string {
	return validation.IsDNS1123Label(name)
}

// RuleSource returns the Source value of entries injected by the named rule.
func RuleSource(rule string) string {
	return SourceRulePrefix + rule
}

// RuleFromSource returns the rule name of a "rule/<name>" source and whether
// source names a rule at all.
func RuleFromSource(source string) (string, bool) {
	if !strings.HasPrefix(source, SourceRulePrefix) {
		return "", false
	}
	return strings.TrimPrefix(source, SourceRulePrefix), true
}
