// Command etcd is etcd's own server main, built from the Go module proxy.
//
// A plain "go install go.etcd.io/etcd/server/v3" fails because etcd's go.mod
// carries replace directives; wrapping etcdmain in a module of our own sidesteps
// that while running exactly the upstream server code.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
