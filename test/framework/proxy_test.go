package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func dialLines(t *testing.T, addr string) *lineConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &lineConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *lineConn) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// recv reads one line within d; "" and the error when none arrives.
func (c *lineConn) recv(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

// A stalled proxy keeps connections open and forwards nothing (on old or new
// connections); after Resume the held bytes arrive in order.
func TestProxyStallAndResume(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	old := dialLines(t, p.Addr())
	old.send(t, "before")
	if got, err := old.recv(10 * time.Second); err != nil || got != "before" {
		t.Fatalf("through the proxy: %q, %v; want %q", got, err, "before")
	}

	p.Stall()
	if !p.Stalled() {
		t.Fatal("Stalled() = false after Stall")
	}
	old.send(t, "held")
	opened := dialLines(t, p.Addr()) // accepted, not connected onward
	opened.send(t, "new")
	// The negative check needs some time to pass; a stalled proxy that
	// forwarded would answer within microseconds on loopback.
	for _, c := range []*lineConn{old, opened} {
		if got, err := c.recv(300 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("stalled proxy forwarded: %q, %v", got, err)
		}
	}

	p.Resume()
	if p.Stalled() {
		t.Fatal("Stalled() = true after Resume")
	}
	// A timed-out read left the bufio.Reader intact: the held line is next.
	for c, want := range map[*lineConn]string{old: "held", opened: "new"} {
		if got, err := c.recv(10 * time.Second); err != nil || got != want {
			t.Errorf("after Resume: %q, %v; want %q", got, err, want)
		}
	}
	// Stall and Resume are idempotent.
	p.Resume()
	p.Stall()
	p.Stall()
	p.Resume()
	old.send(t, "again")
	if got, err := old.recv(10 * time.Second); err != nil || got != "again" {
		t.Errorf("after a second stall: %q, %v", got, err)
	}
}

// Close ends every connection, stalled or not, and returns.
func TestProxyCloseEndsConnections(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dialLines(t, p.Addr())
	c.send(t, "x")
	if _, err := c.recv(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	c.send(t, "y")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.recv(10 * time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("connection still open after Close: %q, %v", got, err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("proxy still accepts connections after Close")
	}
}

// h2Upstream is an HTTP/2 TLS server standing in for the API server: a
// request with watch=true in its query streams a line every 20 ms until the
// client goes away, any other answers its path at once. It records every
// request it received.
type h2Upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func startH2Upstream(t *testing.T) *h2Upstream {
	t.Helper()
	u := &h2Upstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.got = append(u.got, r.Method+" "+r.URL.RequestURI())
		u.mu.Unlock()
		if r.URL.Query().Get("watch") != "true" {
			_, _ = io.WriteString(w, r.URL.Path+"\n")
			return
		}
		fl := w.(http.Flusher)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
				return
			}
			fl.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *h2Upstream) received(req string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Contains(u.got, req)
}

// startTestInspectingProxy puts an inspecting proxy in front of u, serving a
// certificate of a fresh CA, and returns it with that CA's pool.
func startTestInspectingProxy(t *testing.T, u *h2Upstream) (*Proxy, *x509.CertPool) {
	t.Helper()
	ca, err := newCA()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.newServingCert("proxy", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.certPEM, kp.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	upstreamRoots := x509.NewCertPool()
	upstreamRoots.AddCert(u.srv.Certificate())
	p, err := StartInspectingProxy(u.srv.Listener.Addr().String(), ProxyTLS{
		Server:   &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		Upstream: &tls.Config{RootCAs: upstreamRoots},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return p, roots
}

// h2Client is one HTTP/2 client, hence one connection through the proxy.
func h2Client(roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
}

// stream reads a streaming response's lines into a channel.
func stream(t *testing.T, c *http.Client, url string) <-chan string {
	t.Helper()
	lines, err := openStream(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// openStream is stream for any goroutine: the stream ends with ctx.
func openStream(ctx context.Context, c *http.Client, url string) (<-chan string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.ProtoMajor != 2 {
		resp.Body.Close()
		return nil, fmt.Errorf("response over %s, want HTTP/2", resp.Proto)
	}
	lines := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines, nil
}

// arrives reports whether a line arrives within d.
func arrives(lines <-chan string, d time.Duration) bool {
	select {
	case _, ok := <-lines:
		return ok
	case <-time.After(d):
		return false
	}
}

// quiet empties lines for d; it reports whether none arrived.
func quiet(lines <-chan string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-lines:
			if ok {
				// Keep emptying: the caller asks about the whole window.
				for {
					select {
					case <-lines:
					case <-deadline:
						return false
					}
				}
			}
			return true
		case <-deadline:
			return true
		}
	}
}

func get(c *http.Client, url string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// watchesLeases is what a test matches to stall a controller's Lease watch.
func watchesLeases(c ProxyConn) bool {
	for _, w := range c.Watches {
		if strings.Contains(w, "/leases?") {
			return true
		}
	}
	return false
}

// StallConns stalls only the connections whose requests match, in both
// directions, including a connection that starts matching later (its
// matching request is held before it reaches the server); the others keep
// forwarding; ResumeConns releases what was held.
func TestProxyStallConnsByRequest(t *testing.T) {
	u := startH2Upstream(t)
	p, roots := startTestInspectingProxy(t, u)
	base := "https://" + p.Addr()
	leaseWatch := "/apis/coordination.k8s.io/v1/namespaces/a/leases?watch=true&resourceVersion=1"

	// Client A: the Lease watch. Client B: writes and another watch (like
	// the controller's shared connection, which watches Nodes). Client C
	// starts with a plain request and asks for a Lease watch later.
	a, b, c := h2Client(roots), h2Client(roots), h2Client(roots)
	leases := stream(t, a, base+leaseWatch)
	nodes := stream(t, b, base+"/api/v1/nodes?watch=true")
	if _, err := get(c, base+"/healthz", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !arrives(leases, 10*time.Second) || !arrives(nodes, 10*time.Second) {
		t.Fatal("no events through the proxy before the stall")
	}

	p.StallConns(watchesLeases)
	// Events already in flight may still arrive; then nothing.
	quiet(leases, 200*time.Millisecond)
	if !quiet(leases, 300*time.Millisecond) {
		t.Error("the stalled Lease watch still delivers events")
	}
	if !arrives(nodes, 10*time.Second) {
		t.Error("the Node watch on another connection stopped")
	}
	if got, err := get(b, base+"/apis/coordination.k8s.io/v1/namespaces/a/leases/canary", 10*time.Second); err != nil || got == "" {
		t.Errorf("a write on another connection: %q, %v", got, err)
	}
	// A stalled connection forwards no new request either.
	if _, err := get(a, base+"/api/v1/namespaces/a/pods/x", 300*time.Millisecond); err == nil {
		t.Error("a request on the stalled connection was answered")
	}
	// C starts matching: its watch request is held before it is forwarded.
	late := "/apis/coordination.k8s.io/v1/namespaces/b/leases?watch=true"
	lateLines := make(chan (<-chan string), 1)
	go func() {
		l, err := openStream(t.Context(), c, base+late)
		if err != nil {
			t.Error(err)
			l = nil
		}
		lateLines <- l
	}()
	time.Sleep(300 * time.Millisecond)
	if u.received("GET " + late) {
		t.Error("the server received a Lease watch request on a connection StallConns matches")
	}

	conns := p.Conns()
	if len(conns) != 3 {
		t.Fatalf("%d connections, want 3: %+v", len(conns), conns)
	}
	for i, want := range []bool{true, false, true} {
		if conns[i].ID != i+1 || conns[i].Protocol != "h2" || !conns[i].Inspected {
			t.Errorf("connection %d: %+v", i+1, conns[i])
		}
		if conns[i].Stalled != want {
			t.Errorf("connection %d stalled %v, want %v (requests %v)", i+1, conns[i].Stalled, want, conns[i].Requests)
		}
	}
	if !slices.Contains(conns[0].Watches, "GET "+leaseWatch) || !slices.Contains(conns[1].Requests, "GET /apis/coordination.k8s.io/v1/namespaces/a/leases/canary") {
		t.Errorf("requests not recorded: %+v", conns[:2])
	}

	p.ResumeConns()
	if !arrives(leases, 10*time.Second) {
		t.Error("the Lease watch delivers nothing after ResumeConns")
	}
	select {
	case l := <-lateLines:
		if l != nil && !arrives(l, 10*time.Second) {
			t.Error("the late Lease watch delivers nothing after ResumeConns")
		}
	case <-time.After(10 * time.Second):
		t.Error("the late Lease watch was not answered after ResumeConns")
	}
	if _, err := get(a, base+"/api/v1/namespaces/a/pods/y", 10*time.Second); err != nil {
		t.Errorf("a request on the resumed connection: %v", err)
	}

	// Stall (every connection) still works on an inspecting proxy, and
	// Resume does not end StallConns.
	p.Stall()
	if _, err := get(b, base+"/healthz", 300*time.Millisecond); err == nil {
		t.Error("Stall forwarded a request")
	}
	p.StallConns(watchesLeases)
	p.Resume()
	if _, err := get(b, base+"/healthz", 10*time.Second); err != nil {
		t.Errorf("after Resume: %v", err)
	}
	quiet(leases, 200*time.Millisecond)
	if !quiet(leases, 300*time.Millisecond) {
		t.Error("Resume ended StallConns")
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Conns() {
		if !c.Closed {
			t.Errorf("connection %d not closed after Close", c.ID)
		}
	}
}

// The inspector reads requests across frame boundaries, CONTINUATION frames
// and padding, whatever the chunking, and gives up (for good) on bytes that
// are not HTTP/2.
func TestH2InspectorFraming(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	enc := func(fields ...string) []byte {
		var b bytes.Buffer
		e := hpack.NewEncoder(&b)
		for i := 0; i < len(fields); i += 2 {
			_ = e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return b.Bytes()
	}
	buf.WriteString(http2.ClientPreface)
	_ = fr.WriteSettings()
	block := enc(":method", "GET", ":path", "/api/v1/nodes?watch=true", ":scheme", "https", ":authority", "x", "user-agent", strings.Repeat("u", 300))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:10], EndHeaders: false, PadLength: 7,
		Priority: http2.PriorityParam{Weight: 3, StreamDep: 0}})
	_ = fr.WriteContinuation(1, false, block[10:20])
	_ = fr.WriteContinuation(1, true, block[20:])
	_ = fr.WriteData(1, false, bytes.Repeat([]byte("d"), 5000))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(":method", "PUT", ":path", "/apis/x/leases/y"), EndHeaders: true})
	_ = fr.WriteData(3, true, []byte("body"))
	// Trailers: a header block without pseudo-headers.
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc("grpc-status", "0"), EndHeaders: true, EndStream: true})
	data := buf.Bytes()

	for _, chunk := range []int{1, 7, 100, len(data)} {
		var got []string
		failed := false
		in := newH2Inspector(func(m, p string) { got = append(got, m+" "+p) }, func() { failed = true })
		for i := 0; i < len(data); i += chunk {
			in.feed(data[i:min(i+chunk, len(data))])
		}
		want := []string{"GET /api/v1/nodes?watch=true", "PUT /apis/x/leases/y"}
		if failed || !slices.Equal(got, want) {
			t.Errorf("chunks of %d: %q (gave up %v), want %q", chunk, got, failed, want)
		}
	}

	failed := 0
	in := newH2Inspector(func(m, p string) { t.Errorf("request from HTTP/1.1 bytes: %s %s", m, p) }, func() { failed++ })
	in.feed([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	in.feed(data)
	if failed != 1 {
		t.Errorf("gave up %d times on HTTP/1.1 bytes, want 1", failed)
	}

	for path, want := range map[string]bool{"/api/v1/nodes?watch=true": true, "/api/v1/nodes?watch=1&x=y": true,
		"/api/v1/nodes?watch=false": false, "/api/v1/nodes": false, "/watch=true": false} {
		if isWatch(path) != want {
			t.Errorf("isWatch(%q) = %v", path, !want)
		}
	}
}
