package options

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	componentbaseconfig "k8s.io/component-base/config"
)

// RESTConfig builds the client configuration of a component from its
// clientConnection: the kubeconfig file when one is set, the in-cluster
// service account otherwise, with the configured QPS, burst and content types.
func RESTConfig(cc componentbaseconfig.ClientConnectionConfiguration, userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if cc.Kubeconfig != "" {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cc.Kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %q: %w", cc.Kubeconfig, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given (clientConnection.kubeconfig or --kubeconfig) and not running in a cluster: %w", err)
		}
	}
	cfg.QPS = cc.QPS
	cfg.Burst = int(cc.Burst)
	cfg.ContentType = cc.ContentType
	cfg.AcceptContentTypes = cc.AcceptContentTypes
	return rest.AddUserAgent(cfg, userAgent), nil
}
