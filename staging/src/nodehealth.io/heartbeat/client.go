package heartbeat

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client is all a Renewer asks of the API server. NewClient returns one that
// links only the two API groups it uses; a process that already has a
// client-go clientset adapts it with nodehealth.io/heartbeat/clientset
// instead, at no extra cost.
//
// Errors must be the API server's own (*apierrors.StatusError), so that
// apierrors.IsNotFound, IsConflict, IsForbidden... classify them: the
// renewer creates the Lease on NotFound, re-reads it on Conflict, and stops
// looking for the Node's UID on a definite "no".
type Client interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error)
	// ReviewSelf returns who the credentials authenticate as (a
	// SelfSubjectReview, which needs no permission): a pod-bound
	// service-account token carries its node's name and UID in the extras
	// authentication.kubernetes.io/node-name and .../node-uid.
	ReviewSelf(ctx context.Context) (*authenticationv1.UserInfo, error)
	// NodeUID reads the UID of the Node name; the fallback for credentials
	// that carry no node, and only when they may get Nodes.
	NodeUID(ctx context.Context, name string) (types.UID, error)
}

// Content types of the lean client: protobuf, which every built-in API
// serves, with JSON accepted in case a proxy in between insists on it.
const (
	protobufContentType = runtime.ContentTypeProtobuf
	acceptContentTypes  = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	// acceptPartialMetadata asks for a Node's metadata only: the renewer
	// wants its UID, and this way the Node type is never linked.
	acceptPartialMetadata = runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
		runtime.ContentTypeJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// leanScheme knows coordination/v1, authentication/v1 and the metadata types,
// and nothing else: client-go's kubernetes/scheme would register every API
// group of Kubernetes, and linking those types is most of a small binary's
// memory (docs/benchmarks.md).
var leanCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{coordinationv1.AddToScheme, authenticationv1.AddToScheme, metav1.AddMetaToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registrations; cannot fail
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// NewClient returns a Client for cfg that links and registers only the API
// groups the renewer uses (coordination.k8s.io/v1, authentication.k8s.io/v1)
// and speaks protobuf unless cfg sets a content type. It shares one HTTP
// connection pool and cfg's rate limits between them.
func NewClient(cfg *rest.Config) (Client, error) {
	if cfg == nil {
		return nil, fmt.Errorf("heartbeat: a REST configuration is required")
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	base := rest.CopyConfig(cfg)
	if base.ContentType == "" {
		base.ContentType = protobufContentType
	}
	if base.AcceptContentTypes == "" {
		base.AcceptContentTypes = acceptContentTypes
	}
	base.NegotiatedSerializer = leanCodecs.WithoutConversion()
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if base.RateLimiter == nil && base.QPS > 0 {
		if base.Burst <= 0 {
			return nil, fmt.Errorf("heartbeat: burst must be positive when QPS is (%v)", base.QPS)
		}
		// One limiter shared by the group clients, as in a clientset.
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(base.QPS, base.Burst)
	}
	forGroup := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(base)
		c.APIPath = apiPath
		c.GroupVersion = &gv
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	var c leanClient
	if c.coordination, err = forGroup("/apis", coordinationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if c.authentication, err = forGroup("/apis", authenticationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if c.core, err = forGroup("/api", schema.GroupVersion{Version: "v1"}); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return &c, nil
}

type leanClient struct {
	coordination, authentication, core *rest.RESTClient
}

func (c *leanClient) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *leanClient) CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Post().Namespace(lease.Namespace).Resource("leases").Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *leanClient) UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Put().Namespace(lease.Namespace).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (c *leanClient) ReviewSelf(ctx context.Context) (*authenticationv1.UserInfo, error) {
	out := &authenticationv1.SelfSubjectReview{}
	if err := c.authentication.Post().Resource("selfsubjectreviews").Body(&authenticationv1.SelfSubjectReview{}).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return &out.Status.UserInfo, nil
}

func (c *leanClient) NodeUID(ctx context.Context, name string) (types.UID, error) {
	out := &metav1.PartialObjectMetadata{}
	err := c.core.Get().Resource("nodes").Name(name).SetHeader("Accept", acceptPartialMetadata).Do(ctx).Into(out)
	if err != nil {
		return "", err
	}
	return out.UID, nil
}
