package framework

import (
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"time"
)

// Proxy is a loopback TCP proxy to put between a component and a server (the
// API server, say) to break the connection in ways a real network does: Stall
// stops forwarding in both directions while every connection stays open, as
// on a path that silently drops packets; Resume forwards what was held back.
// HTTP/2 carries every request of a client on one connection, so stalling it
// stalls watches, writes and leader election alike.
//
// StallConns stalls only some connections. To choose them by what they carry,
// start the proxy with StartInspectingProxy (or Environment.StartAPIServerProxy):
// it terminates TLS, so it can read the HTTP/2 requests of each connection
// (ProxyConn.Requests, ProxyConn.Watches) while forwarding every byte
// unchanged.
type Proxy struct {
	ln     net.Listener
	target string
	tls    *ProxyTLS

	mu sync.Mutex
	// changed is closed and replaced whenever something that decides whether
	// a connection may forward changes: a stall, a resume, a request seen on
	// a connection, Close. Blocked forwarders wait on it.
	changed chan struct{}
	stalled bool
	match   func(ProxyConn) bool // StallConns; nil when none
	closed  bool
	sockets map[net.Conn]struct{}
	conns   []*proxyConn
	wg      sync.WaitGroup
}

// ProxyTLS makes a Proxy terminate TLS: clients handshake with Server, and the
// proxy connects to its target with Upstream, offering the application
// protocol (ALPN) the client negotiated, so that both sides speak the same
// protocol and every byte in between is forwarded unchanged. The server sees
// the proxy's client certificate (Upstream.Certificates), not the client's.
type ProxyTLS struct {
	Server   *tls.Config
	Upstream *tls.Config
}

// ProxyConn describes one connection a Proxy accepted.
type ProxyConn struct {
	// ID counts connections in the order they were accepted, from 1.
	ID     int
	Opened time.Time
	// Protocol is the application protocol negotiated with the client
	// ("h2", "http/1.1"); empty for a plain TCP proxy.
	Protocol string
	// Requests are the first maxRecordedRequests requests the client sent
	// on the connection ("GET /api/v1/nodes?watch=true"), read from its
	// HTTP/2 HEADERS frames; Watches every request of the connection with
	// watch=true in its query, however many. Both stay empty on a plain TCP
	// proxy, which cannot read TLS.
	Requests []string
	Watches  []string
	// Inspected is false when the connection's bytes could not be read as
	// HTTP/2 (a protocol other than h2, or a malformed frame): it is still
	// forwarded, but Requests and Watches say nothing about it.
	Inspected bool
	// Stalled reports whether the connection is held back now; Closed
	// whether it has ended.
	Stalled bool
	Closed  bool
}

// maxRecordedRequests bounds ProxyConn.Requests (watches are always kept: a
// client opens few).
const maxRecordedRequests = 1000

// proxyConn is the proxy's record of one connection; guarded by Proxy.mu.
type proxyConn struct {
	info ProxyConn
}

// StartProxy listens on a free loopback port and forwards every connection to
// target ("host:port").
func StartProxy(target string) (*Proxy, error) { return startProxy(target, nil) }

// StartInspectingProxy is StartProxy terminating TLS with cfg, so that the
// requests of each connection can be read (ProxyConn) and StallConns can
// choose connections by what they carry.
func StartInspectingProxy(target string, cfg ProxyTLS) (*Proxy, error) {
	return startProxy(target, &cfg)
}

func startProxy(target string, cfg *ProxyTLS) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, tls: cfg, changed: make(chan struct{}), sockets: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// notifyLocked wakes every blocked forwarder to look again; p.mu is held.
func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Stall stops forwarding on every connection: bytes already read are held,
// new connections are accepted but not connected onward, and nothing is
// closed.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.notifyLocked()
	}
}

// Resume forwards again, starting with what was held back. Connections
// stalled by StallConns stay stalled.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		p.notifyLocked()
	}
}

// Stalled reports whether every connection is stalled (Stall).
func (p *Proxy) Stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// StallConns stalls, in both directions, every connection for which match
// holds, and keeps checking: a connection that carries a matching request
// later, or that is opened later and carries one, stalls as soon as the
// proxy has read that request (before forwarding it). The other connections
// keep forwarding. A later call replaces match; ResumeConns ends it.
//
// To stall one client's Lease watch and nothing else, match on the watches a
// connection carries (ProxyConn.Watches), which needs StartInspectingProxy:
// which of a client's connections opened first, or which carries a
// long-lived stream, says nothing reliable about what it carries (both of a
// controller's connections carry watches, and a restart or a re-dial changes
// the order).
func (p *Proxy) StallConns(match func(ProxyConn) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = match
	p.notifyLocked()
}

// ResumeConns ends StallConns: the connections it held forward again,
// starting with what was held back.
func (p *Proxy) ResumeConns() { p.StallConns(nil) }

// Conns describes every connection accepted so far, in accept order
// (including closed ones).
func (p *Proxy) Conns() []ProxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProxyConn, len(p.conns))
	for i, c := range p.conns {
		out[i] = p.snapshotLocked(c)
	}
	return out
}

func (p *Proxy) snapshotLocked(c *proxyConn) ProxyConn {
	info := c.info
	info.Requests = slices.Clone(info.Requests)
	info.Watches = slices.Clone(info.Watches)
	info.Stalled = p.blockedLocked(c)
	return info
}

// blockedLocked reports whether c may not forward now; p.mu is held.
func (p *Proxy) blockedLocked(c *proxyConn) bool {
	if p.stalled {
		return true
	}
	if p.match == nil || c == nil {
		return false
	}
	info := c.info
	return p.match(info)
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
	for c := range p.sockets {
		_ = c.Close()
	}
	p.notifyLocked() // release goroutines waiting to forward
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// waitForwarding blocks while c may not forward (a nil c: while the whole
// proxy is stalled); false once the proxy is closed.
func (p *Proxy) waitForwarding(c *proxyConn) bool {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return false
		}
		if !p.blockedLocked(c) {
			p.mu.Unlock()
			return true
		}
		ch := p.changed
		p.mu.Unlock()
		<-ch
	}
}

// track records s so Close can close it; false when the proxy is closed.
func (p *Proxy) track(s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = s.Close()
		return false
	}
	p.sockets[s] = struct{}{}
	return true
}

func (p *Proxy) untrack(s net.Conn) {
	p.mu.Lock()
	delete(p.sockets, s)
	p.mu.Unlock()
	_ = s.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		s, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(s) {
			return
		}
		p.mu.Lock()
		c := &proxyConn{info: ProxyConn{ID: len(p.conns) + 1, Opened: time.Now()}}
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(s, c)
	}
}

func (p *Proxy) serve(client net.Conn, c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		c.info.Closed = true
		p.mu.Unlock()
	}()
	defer p.untrack(client)
	// A connection opened during a stall hangs like the others (before
	// its TLS handshake, too).
	if !p.waitForwarding(nil) {
		return
	}
	var inspect func([]byte)
	if p.tls != nil {
		tc := tls.Server(client, p.tls.Server)
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		if err := tc.Handshake(); err != nil {
			return
		}
		_ = tc.SetDeadline(time.Time{})
		proto := tc.ConnectionState().NegotiatedProtocol
		p.mu.Lock()
		c.info.Protocol = proto
		c.info.Inspected = proto == "h2"
		p.mu.Unlock()
		if proto == "h2" {
			in := newH2Inspector(func(method, path string) { p.recordRequest(c, method, path) },
				func() { p.mu.Lock(); c.info.Inspected = false; p.mu.Unlock() })
			inspect = in.feed
		}
		client = tc
	}
	server, err := p.dialTarget(c)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, c, inspect); done <- struct{}{} }()
	go func() { p.pipe(client, server, c, nil); done <- struct{}{} }()
	// When one direction ends, end the other: a half-open connection would
	// only hide the failure from the component.
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
}

// dialTarget connects to the target, over TLS offering the client's
// application protocol when the proxy terminates TLS.
func (p *Proxy) dialTarget(c *proxyConn) (net.Conn, error) {
	if p.tls == nil {
		return net.Dial("tcp", p.target)
	}
	cfg := p.tls.Upstream.Clone()
	p.mu.Lock()
	proto := c.info.Protocol
	p.mu.Unlock()
	cfg.NextProtos = nil
	if proto != "" {
		cfg.NextProtos = []string{proto}
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second}, Config: cfg}
	return d.Dial("tcp", p.target)
}

// recordRequest notes a request read from c's client and wakes forwarders,
// so that a connection StallConns now matches stalls before the request is
// forwarded.
func (p *Proxy) recordRequest(c *proxyConn, method, path string) {
	req := method + " " + path
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(c.info.Requests) < maxRecordedRequests {
		c.info.Requests = append(c.info.Requests, req)
	}
	if isWatch(path) {
		c.info.Watches = append(c.info.Watches, req)
	}
	if p.match != nil {
		p.notifyLocked()
	}
}

// pipe copies src to dst, holding every chunk while the connection may not
// forward. inspect, when set, reads each chunk first: what it learns (a
// request that makes StallConns match) applies to that very chunk.
func (p *Proxy) pipe(dst, src net.Conn, c *proxyConn, inspect func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if inspect != nil {
				inspect(buf[:n])
			}
			if !p.waitForwarding(c) {
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
