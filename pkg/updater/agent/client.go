package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
)

// The agent's API clients link only what it uses: core/v1 (its Node,
// Events) and updates.nodehealth.io/v1alpha1 —
// not client-go's clientset of every API group, which would be most of a
// per-node process's memory (docs/benchmarks.md).
var coreCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, metav1.AddMetaToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registrations; cannot fail
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

const shadows = "bottlerocketshadows"

var updatesCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{updatesv1alpha1.AddToScheme, metav1.AddMetaToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// KubeClient implements ShadowClient, NodeGetter and EventRecorder for one
// node, and watches that node's Node and shadow. It holds no pod client: the
// operator drains.
type KubeClient struct {
	node    string
	core    *rest.RESTClient
	updates *rest.RESTClient
	// pod is the agent's own Pod, which its Events are about (see Event);
	// empty outside a cluster.
	podNamespace, podName string

	nodeInformer   cache.SharedIndexInformer
	shadowInformer cache.SharedIndexInformer
}

// NewKubeClient returns the agent's client for node. Its Events are about its
// own Pod (podNamespace/podName, from the downward API) when both are set,
// else about the shadow in "default". Built-in types go as protobuf unless
// cfg says otherwise; the shadow CRD speaks JSON.
func NewKubeClient(cfg *rest.Config, node, podNamespace, podName string) (*KubeClient, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	base := rest.CopyConfig(cfg)
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	k := &KubeClient{node: node}
	if podNamespace != "" && podName != "" {
		k.podNamespace, k.podName = podNamespace, podName
	}
	if k.core, err = newCoreClient(base, httpClient); err != nil {
		return nil, err
	}
	if k.updates, err = newUpdatesClient(base, httpClient); err != nil {
		return nil, err
	}
	k.nodeInformer = newOneObjectInformer(k.core, "nodes", node, &v1.Node{}, func() runtime.Object { return &v1.NodeList{} })
	k.shadowInformer = newOneObjectInformer(k.updates, shadows, node, &updatesv1alpha1.BottlerocketShadow{},
		func() runtime.Object { return &updatesv1alpha1.BottlerocketShadowList{} })
	return k, nil
}

func newCoreClient(base *rest.Config, httpClient *http.Client) (*rest.RESTClient, error) {
	c := rest.CopyConfig(base)
	if c.ContentType == "" {
		c.ContentType = runtime.ContentTypeProtobuf
	}
	if c.AcceptContentTypes == "" {
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	c.NegotiatedSerializer = coreCodecs.WithoutConversion()
	c.APIPath = "/api"
	c.GroupVersion = &v1.SchemeGroupVersion
	return rest.RESTClientForConfigAndClient(c, httpClient)
}

func newUpdatesClient(base *rest.Config, httpClient *http.Client) (*rest.RESTClient, error) {
	// The generated typed client would link apply configurations, and
	// through them client-go's discovery and every API group's types.
	crd := rest.CopyConfig(base)
	crd.ContentType, crd.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	crd.NegotiatedSerializer = updatesCodecs.WithoutConversion()
	crd.APIPath = "/apis"
	crd.GroupVersion = &updatesv1alpha1.SchemeGroupVersion
	return rest.RESTClientForConfigAndClient(crd, httpClient)
}

// newOneObjectInformer watches the one object of resource named name (the
// agent's own Node or shadow), so that the agent caches nothing else.
func newOneObjectInformer(client *rest.RESTClient, resource, name string, obj runtime.Object, newList func() runtime.Object) cache.SharedIndexInformer {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	return cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			out := newList()
			err := client.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			opts.Watch = true
			return client.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}, obj, 0, cache.Indexers{})
}

// Start watches the node's Node and shadow and calls wake when either
// changed in a way the agent acts on; it returns once both are synced.
func (k *KubeClient) Start(ctx context.Context, wake func()) error {
	_, err := k.nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { wake() },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*v1.Node), newObj.(*v1.Node)
			// The kubelet's status heartbeats change nothing the agent
			// decides on: only the bootID and the taints do.
			if o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID || !taintsEqual(o.Spec.Taints, n.Spec.Taints) {
				wake()
			}
		},
	})
	if err != nil {
		return err
	}
	if _, err := k.shadowInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}); err != nil {
		return err
	}
	go k.nodeInformer.RunWithContext(ctx)
	go k.shadowInformer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), k.nodeInformer.HasSynced, k.shadowInformer.HasSynced) {
		return fmt.Errorf("watching node %s and its shadow: %w", k.node, context.Cause(ctx))
	}
	return nil
}

func taintsEqual(a, b []v1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Effect != b[i].Effect || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// GetNode answers from the watch of the node once Start returned, and reads
// the Node before.
func (k *KubeClient) GetNode(ctx context.Context, name string) (*v1.Node, error) {
	if name == k.node && k.nodeInformer.HasSynced() {
		obj, ok, err := k.nodeInformer.GetStore().GetByKey(name)
		if err == nil && ok {
			return obj.(*v1.Node), nil
		}
	}
	out := &v1.Node{}
	err := k.core.Get().Resource("nodes").Name(name).Do(ctx).Into(out)
	return out, err
}

// GetShadow always reads the API server: the agent's decisions (above all,
// the reboot marker) must not rest on a cache older than its own last write.
func (k *KubeClient) GetShadow(ctx context.Context, name string) (*updatesv1alpha1.BottlerocketShadow, error) {
	out := &updatesv1alpha1.BottlerocketShadow{}
	err := k.updates.Get().Resource(shadows).Name(name).Do(ctx).Into(out)
	return out, err
}

// UpdateShadowStatus writes the status subresource; the resourceVersion
// makes it fail with a conflict when the shadow changed since it was read.
func (k *KubeClient) UpdateShadowStatus(ctx context.Context, s *updatesv1alpha1.BottlerocketShadow) (*updatesv1alpha1.BottlerocketShadow, error) {
	out := &updatesv1alpha1.BottlerocketShadow{}
	opts := metav1.UpdateOptions{FieldManager: "update-agent"}
	err := k.updates.Put().Resource(shadows).Name(s.Name).SubResource("status").VersionedParams(&opts, metav1.ParameterCodec).Body(s).Do(ctx).Into(out)
	return out, err
}

// Event records an Event about the shadow. It is best effort: a failure is
// logged, never retried, and never holds up the update.
//
// The agent's RBAC allows Events in its own namespace only, and the API
// server keeps an Event about a cluster-scoped object (the shadow) in
// "default". So in a cluster the Event is about the agent's own Pod, with the
// shadow as its related object and named in the message:
// `kubectl get events -n nodehealth-update-agent` lists them, and the
// operator's Events on the shadow and the Node tell the update's story.
func (k *KubeClient) Event(shadow *updatesv1alpha1.BottlerocketShadow, eventType, reason, message string) {
	now := metav1.NewTime(time.Now())
	ref := v1.ObjectReference{
		APIVersion: updatesv1alpha1.SchemeGroupVersion.String(), Kind: "BottlerocketShadow",
		Name: shadow.Name, UID: shadow.UID, ResourceVersion: shadow.ResourceVersion,
	}
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: shadow.Name + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: ref,
		Reason:         reason, Message: truncate(message, 1024), Type: eventType,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              v1.EventSource{Component: "update-agent", Host: k.node},
		ReportingController: "nodehealth.io/update-agent", ReportingInstance: "update-agent-" + k.node,
	}
	if k.podName != "" {
		ev.Namespace = k.podNamespace
		ev.InvolvedObject = v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: k.podNamespace, Name: k.podName}
		ev.Related = &ref
		ev.Message = truncate("BottlerocketShadow "+shadow.Name+": "+message, 1024)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.core.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error(); err != nil {
		klog.Background().Error(err, "Recording an Event failed", "shadow", shadow.Name, "reason", reason)
	}
}
