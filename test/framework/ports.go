package framework

import (
	"errors"
	"net"
	"strconv"
)

// FreeLoopbackPorts returns n distinct TCP ports that are free on 127.0.0.1 at
// the time of the call: every listener stays open until all are found, so none
// repeats. A port is only free at that moment; the framework retries its own
// components that lose the race ("address already in use").
func FreeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("finding free loopback ports"), err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
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
