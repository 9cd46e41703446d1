package delegated

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// recheckEvery bounds how often a handshake looks at the files: a scrape
// every few seconds costs two stats a second at most.
const recheckEvery = time.Second

// CertificateFiles serves the certificate and key in two PEM files and reads
// them again when either changes (size or modification time; a Secret volume
// swaps a symlink, which os.Stat follows). A pair that cannot be read or does
// not match keeps the last good one: a renewal written half-way (the
// certificate before the key) must not take /metrics down.
type CertificateFiles struct {
	certFile, keyFile string
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// NewCertificateFiles reads the pair once; an error says which file failed.
func NewCertificateFiles(certFile, keyFile string) (*CertificateFiles, error) {
	c := &CertificateFiles{certFile: certFile, keyFile: keyFile, now: time.Now}
	stamp, err := c.stampOf()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the metrics certificate %s and key %s: %w", certFile, keyFile, err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, c.now()
	return c, nil
}

// GetCertificate is tls.Config's GetCertificate.
func (c *CertificateFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); now.Sub(c.checked) >= recheckEvery {
		c.checked = now
		c.reloadLocked()
	}
	return c.cert, nil
}

func (c *CertificateFiles) reloadLocked() {
	logger := klog.Background()
	stamp, err := c.stampOf()
	if err != nil {
		logger.Error(err, "Reading the metrics certificate failed; serving the last one read")
		return
	}
	if stamp == c.stamp {
		return
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		// Not recorded as seen: the next check tries again, so the
		// key written a moment after the certificate is picked up.
		logger.Error(err, "The metrics certificate changed but does not load; serving the last one read", "certFile", c.certFile, "keyFile", c.keyFile)
		return
	}
	c.cert, c.stamp = &cert, stamp
	logger.Info("Serving the renewed metrics certificate", "certFile", c.certFile)
}

func (c *CertificateFiles) stampOf() (string, error) {
	var stamp string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("reading the metrics certificate: %w", err)
		}
		stamp += fmt.Sprintf("%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}
