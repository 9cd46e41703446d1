package framework

import (
	"errors"
	"net"
	"strconv"
	"sync"
)

// handedOut holds every port FreeLoopbackPorts returned in this process. A
// port is only free while probed: once its probe listener closes, the kernel
// may hand the same port to the next probe, and two components given it (an
// agent and a heartbeat of one simulated node) race for it, the loser exiting
// with "address already in use" where nothing restarts it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeLoopbackPorts returns n distinct TCP ports that are free on 127.0.0.1 at
// the time of the call and were never returned before in this process: every
// listener stays open until all are found, so none repeats. A port is only
// free at that moment; the framework retries its own components that lose the
// race to another process ("address already in use").
func FreeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	handedOut.Lock()
	defer handedOut.Unlock()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("finding free loopback ports"), err)
		}
		// Held open even when skipped, so that the next probe gets another.
		listeners = append(listeners, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// FreeLoopbackAddresses returns n distinct "127.0.0.1:<port>" addresses, free
// at the time of the call.
func FreeLoopbackAddresses(n int) ([]string, error) {
	ports, err := FreeLoopbackPorts(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}
