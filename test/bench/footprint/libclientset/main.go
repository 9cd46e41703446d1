// Command libclientset is an extension that already has client-go's full
// clientset and embeds nodehealth.io/heartbeat through the clientset
// adapter; compared with refclientset it shows what the library adds to such
// a process.
package main

import (
	"context"
	"flag"
	"log"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/clientset"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	node := flag.String("node", "bench-node", "node name")
	interval := flag.Duration("interval", 10*time.Second, "renew interval")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	r, err := heartbeat.New(clientset.New(cs), heartbeat.Options{
		NodeName: *node, Extension: "lib-clientset", Holder: "lib", RenewInterval: *interval,
		Probe: func(context.Context) error { return nil }, // probed every interval, like the sidecar
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = r.Run(context.Background())
}
