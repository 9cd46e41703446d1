// Command e2e-workload is the workload image of the real-node e2e tests: an
// HTTP server whose /healthz answers 200 (an extension's main container the
// heartbeat sidecar probes, or a user Deployment's pod). On SIGTERM it keeps
// serving for --shutdown-delay, so a drain sees a pod that really takes time
// to terminate, then exits. --start-delay makes it a slow starter: an
// extension that is not ready for a while after each (re)start.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address of the HTTP server")
	delay := flag.Duration("shutdown-delay", time.Second, "how long to keep serving after SIGTERM")
	startDelay := flag.Duration("start-delay", 0, "how long to wait before serving (a slow start)")
	probeURL := flag.String("probe-url", "", "when set, /healthz answers 200 only while a GET of this URL does (e.g. a Service's ClusterIP: the pod is ready when the Service routes)")
	flag.Parse()

	host, _ := os.Hostname()
	mux := http.NewServeMux()
	client := &http.Client{Timeout: time.Second}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if *probeURL != "" {
			resp, err := client.Get(*probeURL)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				http.Error(w, *probeURL+": "+resp.Status, http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		log.Printf("terminating in %s", *delay)
		time.Sleep(*delay)
		_ = srv.Shutdown(context.Background())
	}()
	if *startDelay > 0 {
		log.Printf("starting in %s", *startDelay)
		select {
		case <-time.After(*startDelay):
		case <-ctx.Done():
			return
		}
	}
	log.Printf("serving on %s", *listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
