package framework

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// HTTP/2 framing (RFC 9113 §3.4, §4.1, §6.2, §6.10), as much as reading the
// requests of a client needs.
const (
	h2ClientPreface   = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameHeaderLen  = 9
	h2FrameHeaders    = 0x1
	h2FrameContinue   = 0x9
	h2FlagEndHeaders  = 0x4
	h2FlagPadded      = 0x8
	h2FlagPriority    = 0x20
	h2MaxFrameLen     = 1 << 24
	h2MaxHeaderBuffer = 1 << 20
)

// h2Inspector reads the client side of an HTTP/2 connection as it is
// forwarded and reports each request's method and path. It decodes every
// header block (HPACK is stateful: skipping one would garble the next) and
// skips every other frame without buffering it. It is fed synchronously, so
// a request is reported before the chunk that carries it is forwarded. On
// anything it cannot read it gives up for good (failed is called once); the
// bytes are forwarded all the same.
type h2Inspector struct {
	report func(method, path string)
	failed func()

	buf     []byte
	preface bool // the client preface was read
	skip    int  // bytes of a non-header frame still to discard
	gaveUp  bool
	dec     *hpack.Decoder
	inBlock bool // a header block is open (CONTINUATION frames follow)
	method  string
	path    string
}

func newH2Inspector(report func(method, path string), failed func()) *h2Inspector {
	in := &h2Inspector{report: report, failed: failed}
	in.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		switch f.Name {
		case ":method":
			in.method = f.Value
		case ":path":
			in.path = f.Value
		}
	})
	// The server may allow a larger table than the default; a size update
	// the peers agreed on must not be taken for an error.
	in.dec.SetAllowedMaxDynamicTableSize(1 << 20)
	return in
}

func (in *h2Inspector) giveUp() {
	if !in.gaveUp {
		in.gaveUp = true
		in.buf = nil
		in.failed()
	}
}

// feed reads the next bytes the client sent.
func (in *h2Inspector) feed(b []byte) {
	if in.gaveUp {
		return
	}
	if in.skip > 0 {
		n := min(in.skip, len(b))
		in.skip -= n
		b = b[n:]
	}
	in.buf = append(in.buf, b...)
	for !in.gaveUp {
		if !in.preface {
			if len(in.buf) < len(h2ClientPreface) {
				if !strings.HasPrefix(h2ClientPreface, string(in.buf)) {
					in.giveUp()
				}
				return
			}
			if string(in.buf[:len(h2ClientPreface)]) != h2ClientPreface {
				in.giveUp()
				return
			}
			in.buf = in.buf[len(h2ClientPreface):]
			in.preface = true
		}
		if in.skip > 0 {
			n := min(in.skip, len(in.buf))
			in.skip -= n
			in.buf = in.buf[n:]
			if in.skip > 0 {
				return
			}
		}
		if len(in.buf) < h2FrameHeaderLen {
			in.compact()
			return
		}
		length := int(in.buf[0])<<16 | int(in.buf[1])<<8 | int(in.buf[2])
		typ, flags := in.buf[3], in.buf[4]
		if length > h2MaxFrameLen {
			in.giveUp()
			return
		}
		if typ != h2FrameHeaders && typ != h2FrameContinue {
			if in.inBlock {
				// Only CONTINUATION may follow an open header block.
				in.giveUp()
				return
			}
			in.buf = in.buf[h2FrameHeaderLen:]
			in.skip = length
			continue
		}
		if length > h2MaxHeaderBuffer {
			in.giveUp()
			return
		}
		if len(in.buf) < h2FrameHeaderLen+length {
			return // wait for the whole frame
		}
		payload := in.buf[h2FrameHeaderLen : h2FrameHeaderLen+length]
		in.buf = in.buf[h2FrameHeaderLen+length:]
		in.headerFrame(typ, flags, payload)
	}
}

// compact keeps the buffer from holding on to a large backing array.
func (in *h2Inspector) compact() {
	if cap(in.buf) > 64<<10 {
		in.buf = bytes.Clone(in.buf)
	}
}

// headerFrame decodes one HEADERS or CONTINUATION frame.
func (in *h2Inspector) headerFrame(typ, flags byte, p []byte) {
	switch typ {
	case h2FrameHeaders:
		if in.inBlock {
			in.giveUp()
			return
		}
		pad := 0
		if flags&h2FlagPadded != 0 {
			if len(p) < 1 {
				in.giveUp()
				return
			}
			pad, p = int(p[0]), p[1:]
		}
		if flags&h2FlagPriority != 0 {
			if len(p) < 5 {
				in.giveUp()
				return
			}
			p = p[5:]
		}
		if pad > len(p) {
			in.giveUp()
			return
		}
		p = p[:len(p)-pad]
		in.inBlock, in.method, in.path = true, "", ""
	case h2FrameContinue:
		if !in.inBlock {
			in.giveUp()
			return
		}
	}
	if _, err := in.dec.Write(p); err != nil {
		in.giveUp()
		return
	}
	if flags&h2FlagEndHeaders == 0 {
		return
	}
	in.inBlock = false
	if err := in.dec.Close(); err != nil {
		in.giveUp()
		return
	}
	// Trailers carry no pseudo-headers: only requests are reported.
	if in.method != "" && in.path != "" {
		in.report(in.method, in.path)
	}
}

// isWatch reports whether a request path asks for a watch (Kubernetes:
// watch=true or watch=1 in the query).
func isWatch(path string) bool {
	_, query, ok := strings.Cut(path, "?")
	if !ok {
		return false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return false
	}
	w := v.Get("watch")
	return w == "true" || w == "1"
}

// StartAPIServerProxy starts an inspecting Proxy in front of the API server:
// it serves a certificate for 127.0.0.1 signed by the Environment's CA (so a
// kubeconfig from WriteAdminKubeconfig("https://"+proxy.Addr()) trusts it),
// and connects onward as the admin user, whatever client certificate its
// own clients present: give it only clients that act as the admin anyway.
func (e *Environment) StartAPIServerProxy() (*Proxy, error) {
	serving, err := e.ca.newServingCert("nodehealth-test-proxy", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	servingCert, err := tls.X509KeyPair(serving.certPEM, serving.keyPEM)
	if err != nil {
		return nil, err
	}
	admin, err := tls.X509KeyPair(e.admin.certPEM, e.admin.keyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.ca.cert)
	return StartInspectingProxy(strings.TrimPrefix(e.APIServerURL, "https://"), ProxyTLS{
		Server: &tls.Config{
			Certificates: []tls.Certificate{servingCert},
			// h2 first, as kube-apiserver: Go clients then speak HTTP/2,
			// whose requests the proxy reads.
			NextProtos: []string{"h2", "http/1.1"},
			MinVersion: tls.VersionTLS12,
		},
		Upstream: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}, MinVersion: tls.VersionTLS12},
	})
}
