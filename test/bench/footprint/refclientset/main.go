// Command refclientset is the footprint benchmark's first reference: the
// plainest Lease renewer on client-go's full clientset (every API group
// linked), renewing every --interval like the heartbeat's default.
package main

import (
	"context"
	"flag"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "node-extension-lease", "Lease namespace")
	name := flag.String("name", "ref-clientset.bench-node", "Lease name")
	interval := flag.Duration("interval", 10*time.Second, "renew interval")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases(*namespace)
	ctx := context.Background()
	for ; ; time.Sleep(*interval) {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, *name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: *name}, Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("ref"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			log.Print(err)
		}
	}
}
