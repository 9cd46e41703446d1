package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	nodev1alpha1 "nodehealth.io/api/node/v1alpha1"
	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/clientset"
)

// errTerminated is the context cause of a SIGTERM in this example; a process
// that also restarts for a new configuration file uses a second cause and
// does not release for that one.
var errTerminated = errors.New("terminated")

// An extension (here kube-proxy) renews its Lease while its own health
// endpoint answers, and releases it when it shuts down so that the node is
// gated at once. In a pod the client comes from heartbeat.NewClient (see
// ExampleNewClient) and the node and pod names from the downward API; the
// example runs against a fake clientset, through the clientset adapter.
func Example() {
	var cs kubernetes.Interface = fake.NewClientset()

	r, err := heartbeat.New(clientset.New(cs), heartbeat.Options{
		NodeName:  "node-1",           // os.Getenv("NODE_NAME"), from spec.nodeName
		Extension: "kube-proxy",       // a DNS label: the Lease is kube-proxy.node-1
		Holder:    "kube-proxy-x7k2p", // os.Getenv("POD_NAME"), from metadata.name
		Probe:     healthz("http://127.0.0.1:10256/healthz"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		select {
		case <-signals:
			cancel(errTerminated)
		case <-ctx.Done():
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()

	// For the example only: wait for the first renewal, then pretend a
	// SIGTERM arrived.
	for !r.Holding() {
		time.Sleep(10 * time.Millisecond)
	}
	printLease(cs)
	cancel(errTerminated)
	<-done

	// Run leaves the Lease alone when it returns; a shutdown releases it.
	if errors.Is(context.Cause(ctx), errTerminated) {
		releaseCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		if err := r.Release(releaseCtx, heartbeat.ReasonTerminating, "kube-proxy is shutting down"); err != nil {
			fmt.Println(err)
		}
	}
	printLease(cs)

	// Output:
	// kube-proxy.node-1 holder="kube-proxy-x7k2p" reason=""
	// kube-proxy.node-1 holder="" reason="Terminating"
}

// An extension without a client-go clientset builds the heartbeat's own lean
// client from its REST configuration: it links and registers only the Lease
// and SelfSubjectReview types, and speaks protobuf. An extension that has a
// clientset passes clientset.New(cs) instead and pays nothing more.
func ExampleNewClient() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := heartbeat.NewClient(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := heartbeat.New(client, heartbeat.Options{
		NodeName:  os.Getenv("NODE_NAME"),
		Extension: "my-csi-node",
		Holder:    os.Getenv("POD_NAME"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = r.Run(context.TODO())
}

// healthz is a minimal HTTP probe. The example's endpoint does not exist, so
// it reports healthy when nothing listens; a real extension returns the
// error.
func healthz(url string) heartbeat.Probe {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil // a real probe: return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func printLease(client kubernetes.Interface) {
	l, err := client.CoordinationV1().Leases(nodev1alpha1.DefaultLeaseNamespace).Get(context.Background(), "kube-proxy.node-1", metav1.GetOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s holder=%q reason=%q\n", l.Name, *l.Spec.HolderIdentity, l.Annotations[nodev1alpha1.ReasonAnnotation])
}
