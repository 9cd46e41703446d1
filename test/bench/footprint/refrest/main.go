// Command refrest is the footprint benchmark's second reference: the same
// renewer as refclientset on rest.RESTClientFor with a scheme of
// coordination/v1 only, the smallest client-go allows.
package main

import (
	"context"
	"flag"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "node-extension-lease", "Lease namespace")
	name := flag.String("name", "ref-rest.bench-node", "Lease name")
	interval := flag.Duration("interval", 10*time.Second, "renew interval")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		log.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &coordinationv1.SchemeGroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for ; ; time.Sleep(*interval) {
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{}
		err := c.Get().Namespace(*namespace).Resource("leases").Name(*name).Do(ctx).Into(l)
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: *name}, Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("ref"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
			err = c.Post().Namespace(*namespace).Resource("leases").Body(l).Do(ctx).Error()
		} else if err == nil {
			l.Spec.RenewTime = &now
			err = c.Put().Namespace(*namespace).Resource("leases").Name(*name).Body(l).Do(ctx).Error()
		}
		if err != nil {
			log.Print(err)
		}
	}
}
