package config

// The *PathRefs functions return pointers to every field of a configuration
// that holds a file system path, so that the loader can resolve relative paths
// against the folder of the configuration file (the kubelet's rule: a file
// mounted from a ConfigMap refers to its neighbours, not to the process's
// working directory). They must list every path field; helpers_test.go walks
// the types by reflection and fails when a new field is neither listed here
// nor declared a non-path field.

// NodeHealthControllerConfigurationPathRefs returns the path fields of c.
func NodeHealthControllerConfigurationPathRefs(c *NodeHealthControllerConfiguration) []*string {
	return []*string{
		&c.ClientConnection.Kubeconfig,
		&c.Serving.TLSCertFile, &c.Serving.TLSPrivateKeyFile,
	}
}

// ExtensionHeartbeatConfigurationPathRefs returns the path fields of c. The
// optional probe kinds contribute only when they are set.
func ExtensionHeartbeatConfigurationPathRefs(c *ExtensionHeartbeatConfiguration) []*string {
	paths := []*string{&c.ClientConnection.Kubeconfig, &c.Serving.TLSCertFile, &c.Serving.TLSPrivateKeyFile}
	if c.Probe.HTTP != nil {
		paths = append(paths, &c.Probe.HTTP.CAFile)
	}
	if c.Probe.File != nil {
		paths = append(paths, &c.Probe.File.Path)
	}
	return paths
}

// UpdateOperatorConfigurationPathRefs returns the path fields of c.
func UpdateOperatorConfigurationPathRefs(c *UpdateOperatorConfiguration) []*string {
	paths := []*string{
		&c.ClientConnection.Kubeconfig,
		&c.Serving.TLSCertFile, &c.Serving.TLSPrivateKeyFile,
	}
	for i := range c.AlertSources {
		paths = append(paths, &c.AlertSources[i].CAFile, &c.AlertSources[i].BearerTokenFile)
	}
	return paths
}

// UpdateAgentConfigurationPathRefs returns the path fields of c.
func UpdateAgentConfigurationPathRefs(c *UpdateAgentConfiguration) []*string {
	return []*string{
		&c.ClientConnection.Kubeconfig,
		&c.Serving.TLSCertFile, &c.Serving.TLSPrivateKeyFile,
		&c.APISocketPath,
	}
}
