// Command e2e-pause is the pod sandbox ("pause") image of the real-node e2e
// tests (test/framework/realnode): it holds the pod's namespaces and waits
// for SIGTERM or SIGINT. Built into an image by hack/images like the
// product's binaries, so the tests download nothing.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
