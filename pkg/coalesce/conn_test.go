package coalesce

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// scriptedConn returns its chunks one per Read, then err.
type scriptedConn struct {
	net.Conn
	chunks [][]byte
	err    error
	reads  int
}

func (s *scriptedConn) Read(p []byte) (int, error) {
	s.reads++
	if len(s.chunks) == 0 {
		return 0, s.err
	}
	n := copy(p, s.chunks[0])
	s.chunks = s.chunks[1:]
	if len(s.chunks) == 0 && s.err != nil {
		return n, s.err
	}
	return n, nil
}

// fakeTime is a clock that moves only when slept on or advanced.
type fakeTime struct {
	now    time.Time
	sleeps []time.Duration
}

func (f *fakeTime) sleep(d time.Duration) { f.sleeps = append(f.sleeps, d); f.now = f.now.Add(d) }

func newTestConn(under net.Conn, interval time.Duration, bufSize int) (*Conn, *fakeTime) {
	c := NewConn(under, interval)
	c.buf = make([]byte, bufSize)
	ft := &fakeTime{now: time.Unix(1000, 0)}
	c.sleep, c.now = ft.sleep, func() time.Time { return ft.now }
	return c, ft
}

func TestReadWaitsOnlyWithinInterval(t *testing.T) {
	under := &scriptedConn{chunks: [][]byte{[]byte("first"), []byte("second"), []byte("third")}}
	c, ft := newTestConn(under, 100*time.Millisecond, 64)
	p := make([]byte, 64)

	// An idle connection's first read is not delayed.
	if n, err := c.Read(p); err != nil || string(p[:n]) != "first" || len(ft.sleeps) != 0 {
		t.Fatalf("first read: %q, %v, sleeps %v; want \"first\" with no wait", p[:n], err, ft.sleeps)
	}
	// 30 ms later the next read waits out the remaining 70 ms.
	ft.now = ft.now.Add(30 * time.Millisecond)
	if n, err := c.Read(p); err != nil || string(p[:n]) != "second" || len(ft.sleeps) != 1 || ft.sleeps[0] != 70*time.Millisecond {
		t.Fatalf("second read: %q, %v, sleeps %v; want \"second\" after waiting 70ms", p[:n], err, ft.sleeps)
	}
	// After a quiet spell longer than the interval, no wait again.
	ft.now = ft.now.Add(time.Second)
	if n, err := c.Read(p); err != nil || string(p[:n]) != "third" || len(ft.sleeps) != 1 {
		t.Fatalf("third read: %q, %v, sleeps %v; want \"third\" with no further wait", p[:n], err, ft.sleeps)
	}
}

// A read that fills the buffer means more is waiting: the next is not
// delayed, so coalescing does not cap throughput. Small reads of the caller
// are served from the buffer without touching the connection.
func TestFullBufferIsNotThrottled(t *testing.T) {
	under := &scriptedConn{chunks: [][]byte{bytes.Repeat([]byte("a"), 8), []byte("bb")}}
	c, ft := newTestConn(under, 100*time.Millisecond, 8)
	var got []byte
	p := make([]byte, 3)
	for len(got) < 10 {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if string(got) != "aaaaaaaabb" || len(ft.sleeps) != 0 || under.reads != 2 {
		t.Fatalf("got %q with sleeps %v and %d reads of the connection; want all 10 bytes, no wait, 2 reads", got, ft.sleeps, under.reads)
	}
}

// An error that comes with data is returned after the data, and the data is
// not lost.
func TestErrorAfterData(t *testing.T) {
	under := &scriptedConn{chunks: [][]byte{[]byte("last")}, err: io.EOF}
	c, _ := newTestConn(under, 0, 64)
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "last" {
		t.Fatalf("ReadAll: %q, %v; want \"last\" then EOF", b, err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after EOF: %v, want EOF", err)
	}
}

// Over a real loopback connection, messages written within one interval
// arrive in one read.
func TestCoalescesOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := Dialer(time.Second)
	client, err := dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	p := make([]byte, 1024)
	if _, err := server.Write([]byte("m0;")); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Read(p); err != nil || string(p[:n]) != "m0;" {
		t.Fatalf("first read %q, %v", p[:n], err)
	}
	go func() {
		for i := 1; i <= 5; i++ {
			_, _ = server.Write([]byte{'m', byte('0' + i), ';'})
			time.Sleep(5 * time.Millisecond)
		}
	}()
	n, err := client.Read(p)
	if err != nil || string(p[:n]) != "m1;m2;m3;m4;m5;" {
		t.Fatalf("second read %q, %v; want the five messages written within the interval together", p[:n], err)
	}
}
