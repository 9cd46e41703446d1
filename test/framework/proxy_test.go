package framework

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
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
