package config

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Every string field of every Kind is either a path (listed by the Kind's
// PathRefs, resolved against the config file's folder) or declared not to be
// one here. Adding a string field without deciding fails this test, so a new
// path field cannot silently stay relative to the working directory.
var nonPathFields = sets.New(
	"TypeMeta.Kind", "TypeMeta.APIVersion",
	"LeaderElection.ResourceLock", "LeaderElection.ResourceName", "LeaderElection.ResourceNamespace",
	"ClientConnection.AcceptContentTypes", "ClientConnection.ContentType",
	"Logging.Format", "Logging.VModule[].FilePattern",
	"Logging.Options.Text.OutputRoutingOptions.InfoBufferSize.Quantity.Format",
	"Logging.Options.JSON.OutputRoutingOptions.InfoBufferSize.Quantity.Format",
	"Serving.MetricsBindAddress", "Serving.HealthzBindAddress", "Serving.MetricsAuthentication",
	"LeaseNamespace", "Taint.Key", "Taint.Effect", "MaintenanceReasons[]", "LeavingNodeTaints[]", "ReadinessTaintKey",
	"ExtensionRules[].Name", "ExtensionRules[].LeaseNameTemplate", "ExtensionRules[].FailurePolicy",
	"ExtensionRules[].NodeSelector.MatchLabels{}", "ExtensionRules[].NodeSelector.MatchExpressions[].Key",
	"ExtensionRules[].NodeSelector.MatchExpressions[].Operator", "ExtensionRules[].NodeSelector.MatchExpressions[].Values[]",
	"Eviction.Mode",
	"ExtensionName", "Lease.Namespace", "Probe.HTTP.URL", "Probe.TCP.Address", "Probe.GRPC.Address", "Probe.GRPC.Service",
	"ManagedNodeSelector.MatchLabels{}", "ManagedNodeSelector.MatchExpressions[].Key",
	"ManagedNodeSelector.MatchExpressions[].Operator", "ManagedNodeSelector.MatchExpressions[].Values[]",
	"AlertSources[].Name", "AlertSources[].URL", "Hooks.Namespace", "Hooks.ServiceAccountName",
)

type pathRefsCase struct {
	obj   any
	paths []string
	refs  func() []*string
}

func TestPathRefsPointAtExactlyTheFieldsThatHoldPaths(t *testing.T) {
	var cases []pathRefsCase
	controller := &NodeHealthControllerConfiguration{}
	heartbeat := &ExtensionHeartbeatConfiguration{Probe: ProbeConfiguration{HTTP: &HTTPProbe{}, TCP: &TCPProbe{}, GRPC: &GRPCProbe{}, File: &FileProbe{}}}
	operator := &UpdateOperatorConfiguration{AlertSources: []AlertSource{{}}}
	agent := &UpdateAgentConfiguration{}
	cases = append(cases,
		pathRefsCase{controller, []string{"ClientConnection.Kubeconfig", "Serving.TLSCertFile", "Serving.TLSPrivateKeyFile"}, func() []*string { return NodeHealthControllerConfigurationPathRefs(controller) }},
		pathRefsCase{heartbeat, []string{"ClientConnection.Kubeconfig", "Serving.TLSCertFile", "Serving.TLSPrivateKeyFile", "Probe.HTTP.CAFile", "Probe.File.Path"}, func() []*string { return ExtensionHeartbeatConfigurationPathRefs(heartbeat) }},
		pathRefsCase{operator, []string{"ClientConnection.Kubeconfig", "Serving.TLSCertFile", "Serving.TLSPrivateKeyFile", "AlertSources[].CAFile", "AlertSources[].BearerTokenFile"}, func() []*string { return UpdateOperatorConfigurationPathRefs(operator) }},
		pathRefsCase{agent, []string{"ClientConnection.Kubeconfig", "Serving.TLSCertFile", "Serving.TLSPrivateKeyFile", "APISocketPath"}, func() []*string { return UpdateAgentConfigurationPathRefs(agent) }},
	)
	for _, tc := range cases {
		typeName := reflect.TypeOf(tc.obj).Elem().Name()
		t.Run(typeName, func(t *testing.T) {
			// Every string field is classified.
			pathSet := sets.New(tc.paths...)
			for _, f := range stringFields(reflect.TypeOf(tc.obj).Elem(), "") {
				if !pathSet.Has(f) && !nonPathFields.Has(f) {
					t.Errorf("string field %s.%s is neither a path (add it to %sPathRefs and to this test) nor listed in nonPathFields", typeName, f, typeName)
				}
			}
			// PathRefs points at exactly the path fields: write each
			// field's name into it through reflection, then read the
			// names back through PathRefs.
			v := reflect.ValueOf(tc.obj).Elem()
			for _, p := range tc.paths {
				fieldByPath(v, p).SetString(p)
			}
			var got []string
			for _, ref := range tc.refs() {
				got = append(got, *ref)
			}
			if !sets.New(got...).Equal(pathSet) || len(got) != len(tc.paths) {
				t.Errorf("PathRefs returned %v, want %v", got, tc.paths)
			}
		})
	}
}

// stringFields lists the string-typed leaves of t as dotted paths, with []
// for slice elements and {} for map values.
func stringFields(t reflect.Type, prefix string) []string {
	switch t.Kind() {
	case reflect.Pointer:
		return stringFields(t.Elem(), prefix)
	case reflect.String:
		return []string{prefix}
	case reflect.Slice:
		return stringFields(t.Elem(), prefix+"[]")
	case reflect.Map:
		return stringFields(t.Elem(), prefix+"{}")
	case reflect.Struct:
		var out []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if prefix != "" {
				name = prefix + "." + f.Name
			}
			out = append(out, stringFields(f.Type, name)...)
		}
		return out
	}
	return nil
}

func fieldByPath(v reflect.Value, path string) reflect.Value {
	for _, name := range strings.Split(path, ".") {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		// A slice's element: the first, which the case provides.
		if field, ok := strings.CutSuffix(name, "[]"); ok {
			v = v.FieldByName(field).Index(0)
			continue
		}
		v = v.FieldByName(name)
	}
	return v
}
