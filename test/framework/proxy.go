package framework

import (
	"net"
	"sync"
)

// Proxy is a loopback TCP proxy to put between a component and a server (the
// API server, say) to break the connection in ways a real network does: Stall
// stops forwarding in both directions while every connection stays open, as
// on a path that silently drops packets; Resume forwards what was held back.
// HTTP/2 carries every request of a client on one connection, so stalling it
// stalls watches, writes and leader election alike.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	resumed chan struct{} // closed while forwarding; replaced by Stall
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards every connection to
// target ("host:port").
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, resumed: open, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall stops forwarding: bytes already read are held, new connections are
// accepted but not connected onward, and nothing is closed.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default: // already stalled
	}
}

// Resume forwards again, starting with what was held back.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

// Stalled reports whether the proxy is stalled.
func (p *Proxy) Stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		return false
	default:
		return true
	}
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	select {
	case <-p.resumed:
	default:
		close(p.resumed) // release goroutines waiting to forward
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// waitForwarding blocks while the proxy is stalled; false once it is closed.
func (p *Proxy) waitForwarding() bool {
	p.mu.Lock()
	ch := p.resumed
	p.mu.Unlock()
	<-ch
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}

// track records c so Close can close it; false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	// A connection opened during a stall hangs like the others.
	if !p.waitForwarding() {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	// When one direction ends, end the other: a half-open connection would
	// only hide the failure from the component.
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies src to dst, holding every chunk while the proxy is stalled.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitForwarding() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
