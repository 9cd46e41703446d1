package framework

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The update operator's identity as deploy/update-operator deploys it: the
// ServiceAccount its RBAC is bound to, and the one user ShadowDeletePolicy
// lets delete a shadow mid-update.
const (
	UpdateOperatorNamespace      = "nodehealth-system"
	UpdateOperatorServiceAccount = "update-operator"
	UpdateOperatorUser           = "system:serviceaccount:" + UpdateOperatorNamespace + ":" + UpdateOperatorServiceAccount
)

// updateOperatorGroups are the groups the API server gives a token of that
// ServiceAccount; impersonation must name them, or RBAC bound to a group
// (system:authenticated's discovery, for one) would not apply.
var updateOperatorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + UpdateOperatorNamespace, "system:authenticated"}

// AsUpdateOperator returns a copy of cfg (an admin's) that impersonates the
// update operator's ServiceAccount: its requests meet the RBAC of
// deploy/update-operator/rbac.yaml and the admission policies exactly as the
// deployed operator's do. Admin credentials would skip both, which is how a
// sandbox operator running as the admin was refused what the real one may do.
func AsUpdateOperator(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: UpdateOperatorUser, Groups: updateOperatorGroups}
	return c
}

// WriteUpdateOperatorKubeconfig writes to path the admin kubeconfig with the
// impersonation of AsUpdateOperator, for an update-operator process
// (clientConnection.kubeconfig).
func (e *Environment) WriteUpdateOperatorKubeconfig(path string) error {
	return e.WriteServiceAccountKubeconfig(path, UpdateOperatorNamespace, UpdateOperatorServiceAccount)
}

// WriteServiceAccountKubeconfig writes to path the admin kubeconfig
// impersonating ServiceAccount namespace/name with the groups the API server
// gives its tokens: a process run with it meets that ServiceAccount's RBAC
// and the admission policies as the deployed component does.
func (e *Environment) WriteServiceAccountKubeconfig(path, namespace, name string) error {
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		return err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = "system:serviceaccount:" + namespace + ":" + name
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// InstallControllerRBAC applies the node-health controller's ServiceAccount
// and RBAC (deploy/controller/rbac.yaml, in its namespaces).
func (e *Environment) InstallControllerRBAC(ctx context.Context) error {
	if _, err := e.Kubectl(ctx, "apply", "--server-side", "-f", "deploy/controller/namespaces.yaml", "-f", "deploy/controller/rbac.yaml"); err != nil {
		return fmt.Errorf("installing the controller's RBAC: %w", err)
	}
	return nil
}

// InstallUpdateOperatorRBAC applies the update operator's ServiceAccount and
// RBAC (deploy/update-operator/rbac.yaml, in the namespaces of
// deploy/controller), which AsUpdateOperator's requests are authorized by.
func (e *Environment) InstallUpdateOperatorRBAC(ctx context.Context) error {
	if _, err := e.Kubectl(ctx, "apply", "--server-side", "-f", "deploy/controller/namespaces.yaml", "-f", "deploy/update-operator/rbac.yaml"); err != nil {
		return fmt.Errorf("installing the update operator's RBAC: %w", err)
	}
	return nil
}
