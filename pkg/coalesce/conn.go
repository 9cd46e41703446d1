// Package coalesce owns receive-side coalescing of a network connection: a
// connection that receives a steady stream of small messages (a watch of
// renewing Leases) is read at most once per interval, so that each read
// returns the messages of a whole interval instead of waking the process,
// and the goroutines that decode and hand each message on, once per message.
package coalesce

import (
	"context"
	"net"
	"time"
)

// bufferSize bounds one read. A read that fills it means more is waiting, and
// the next read is not delayed, so coalescing never caps throughput.
const bufferSize = 256 << 10

// Dialer returns a DialContext for rest.Config.Dial whose connections
// coalesce reads over interval. Every response on them can be delayed by up
// to interval, so use it only for a client whose requests are watches or are
// not latency-sensitive.
func Dialer(interval time.Duration) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return NewConn(c, interval), nil
	}
}

// Conn reads its underlying connection into a buffer at most once per
// interval, unless the last read filled the buffer. Read must not be called
// concurrently (crypto/tls serializes its reads); every other method is the
// underlying connection's.
type Conn struct {
	net.Conn
	interval time.Duration

	buf      []byte
	r, w     int
	err      error
	lastFill time.Time
	lastFull bool
	sleep    func(time.Duration)
	now      func() time.Time
}

// NewConn wraps c.
func NewConn(c net.Conn, interval time.Duration) *Conn {
	return &Conn{Conn: c, interval: interval, buf: make([]byte, bufferSize), sleep: time.Sleep, now: time.Now}
}

// Read returns buffered bytes, or, once they are used up, waits until interval
// has passed since the last read of the connection and reads it again. An
// idle connection's first message is therefore not delayed: only messages
// that follow within interval are, and they arrive together.
func (c *Conn) Read(p []byte) (int, error) {
	if c.r == c.w {
		if c.err != nil {
			return 0, c.err
		}
		if !c.lastFull {
			if wait := c.interval - c.now().Sub(c.lastFill); wait > 0 {
				c.sleep(wait)
			}
		}
		n, err := c.Conn.Read(c.buf)
		c.lastFill, c.lastFull = c.now(), n == len(c.buf)
		c.r, c.w, c.err = 0, n, err
		if n == 0 {
			c.err = nil
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}
