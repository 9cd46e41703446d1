package framework

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// tokenExpirationSeconds is an hour: longer than any test that requests one.
const tokenExpirationSeconds = 3600

// ServiceAccountClient authenticates as a ServiceAccount with a token from the
// TokenRequest API, exactly as a pod's projected service-account token does.
type ServiceAccountClient struct {
	// Config carries only the bearer token (and the CA); no client certificate.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Token is the signed JWT.
	Token string
	// Pod is the pod the token is bound to; nil for an unbound token.
	Pod *corev1.Pod
}

// ClientForPodServiceAccount returns a client for namespace/serviceAccount whose token
// is bound to the pod podName running on nodeName (boundObjectRef kind Pod), the way
// the kubelet requests tokens for a pod's projected volume. The apiserver then adds
// the pod and node to the token, and requests made with it carry the user extras
// authentication.kubernetes.io/pod-name, pod-uid, node-name and node-uid; that is
// what a node-scoped agent (an extension heartbeat, the update agent) authenticates
// with and what admission policies can check against the object's node.
//
// The ServiceAccount and the pod (spec.nodeName = nodeName, serviceAccountName =
// serviceAccount) are created if they do not exist; an existing pod must already be
// on nodeName. The node must exist: the token records its UID.
func (e *Environment) ClientForPodServiceAccount(ctx context.Context, namespace, serviceAccount, podName, nodeName string) (*ServiceAccountClient, error) {
	if err := e.ensureServiceAccount(ctx, namespace, serviceAccount); err != nil {
		return nil, err
	}
	pod, err := e.Client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app.kubernetes.io/name": serviceAccount}},
		Spec: corev1.PodSpec{
			NodeName:           nodeName,
			ServiceAccountName: serviceAccount,
			Containers:         []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			// Pods on deleted or unreachable nodes should vanish quickly in tests.
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		pod, err = e.Client.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating pod %s/%s on node %s: %w", namespace, podName, nodeName, err)
	}
	if pod.Spec.NodeName != nodeName {
		return nil, fmt.Errorf("pod %s/%s exists on node %q, not %q", namespace, podName, pod.Spec.NodeName, nodeName)
	}
	if pod.Spec.ServiceAccountName != serviceAccount {
		return nil, fmt.Errorf("pod %s/%s runs as ServiceAccount %q, not %q", namespace, podName, pod.Spec.ServiceAccountName, serviceAccount)
	}
	c, err := e.serviceAccountClient(ctx, namespace, serviceAccount, &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
	})
	if err != nil {
		return nil, err
	}
	c.Pod = pod
	return c, nil
}

// ClientForServiceAccount returns a client for namespace/serviceAccount (created if
// needed) with a token bound to no object: no pod or node extras.
func (e *Environment) ClientForServiceAccount(ctx context.Context, namespace, serviceAccount string) (*ServiceAccountClient, error) {
	if err := e.ensureServiceAccount(ctx, namespace, serviceAccount); err != nil {
		return nil, err
	}
	return e.serviceAccountClient(ctx, namespace, serviceAccount, nil)
}

func (e *Environment) ensureServiceAccount(ctx context.Context, namespace, name string) error {
	_, err := e.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return nil
}

func (e *Environment) serviceAccountClient(ctx context.Context, namespace, serviceAccount string, bound *authenticationv1.BoundObjectReference) (*ServiceAccountClient, error) {
	tr, err := e.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			// No audiences: the token is for the apiserver (--api-audiences defaults
			// to the issuer).
			ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds),
			BoundObjectRef:    bound,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &ServiceAccountClient{Config: cfg, Client: client, Token: tr.Status.Token}, nil
}
