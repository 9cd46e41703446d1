// Package delegated protects a binary's metrics the way kube-controller-manager
// protects its own: HTTPS with the operator's certificate files (reloaded when
// they change) or a self-signed certificate, and every request's
// bearer token authenticated by the API server (TokenReview) and authorized
// for get on the request's non-resource URL (SubjectAccessReview). It is a
// package of its own so that the per-node binaries, which serve their metrics
// plainly, do not link it. It is not k8s.io/apiserver's secure serving and
// delegating options, which kube-controller-manager uses: linking them more
// than doubles the controller's binary and adds about 22 MiB of RSS at start
// (docs/benchmarks.md, "Metrics serving"), past the controller's memory
// budget.
package delegated

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"nodehealth.io/nodehealth/pkg/componentconfig/config"
	"nodehealth.io/nodehealth/pkg/process"
)

// CacheTTL is how long a decision for one token and path is reused, so
// that a scrape every few seconds costs the API server two requests at most
// that often.
const CacheTTL = 10 * time.Second

// maxCached bounds the cache; past it, the cache starts over.
const maxCached = 1024

// Authenticator decides requests with the API server's reviews.
type Authenticator struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]decision
}

type decision struct {
	status  int // http.StatusOK, StatusUnauthorized or StatusForbidden
	expires time.Time
}

// New returns an Authenticator that asks the API server through client.
func New(client kubernetes.Interface) *Authenticator {
	return &Authenticator{client: client, now: time.Now, cache: map[[sha256.Size]byte]decision{}}
}

// TLSConfig returns the TLS configuration of /metrics: the pair in certFile
// and keyFile, read again when either changes (CertificateFiles), or without
// files a fresh self-signed certificate for this host, which scrapers cannot
// verify (insecureSkipVerify, as for kube-controller-manager's own).
func TLSConfig(certFile, keyFile string) (*tls.Config, error) {
	if certFile != "" {
		files, err := NewCertificateFiles(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12}, nil
	}
	return selfSigned()
}

func selfSigned() (*tls.Config, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Wrap returns next behind authentication and authorization: a request
// without a bearer token, or with one the API server does not authenticate,
// gets 401; one not allowed get on its path gets 403.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nodehealth"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		switch status := a.decide(r.Context(), strings.TrimSpace(token), r.URL.Path); status {
		case http.StatusOK:
			next.ServeHTTP(w, r)
		case http.StatusUnauthorized:
			http.Error(w, "Unauthorized", status)
		case http.StatusForbidden:
			http.Error(w, "Forbidden: get "+r.URL.Path+" is not allowed", status)
		default:
			http.Error(w, "the authentication or authorization review failed", status)
		}
	})
}

func (a *Authenticator) decide(ctx context.Context, token, path string) int {
	key := sha256.Sum256([]byte(path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	d, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.status
	}
	status, cacheable := a.review(ctx, token, path)
	if cacheable {
		a.mu.Lock()
		if len(a.cache) >= maxCached {
			a.cache = map[[sha256.Size]byte]decision{}
		}
		a.cache[key] = decision{status: status, expires: now.Add(CacheTTL)}
		a.mu.Unlock()
	}
	return status
}

// review asks the API server; an error is not cached (the next scrape asks
// again) and answers 500.
func (a *Authenticator) review(ctx context.Context, token, path string) (int, bool) {
	logger := klog.FromContext(ctx)
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		logger.Error(err, "TokenReview for a metrics request failed")
		return http.StatusInternalServerError, false
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, true
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		logger.Error(err, "SubjectAccessReview for a metrics request failed")
		return http.StatusInternalServerError, false
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, true
	}
	return http.StatusOK, true
}

// ServeOptions are process.Serve's options for serving: /metrics over HTTPS
// (serving.tlsCertFile's certificate, or a self-signed one) for callers the API server authenticates and authorizes for get on the
// path (TokenReview, SubjectAccessReview) when metricsAuthentication is
// Delegated, none otherwise.
func ServeOptions(serving config.ServingConfiguration, client kubernetes.Interface) ([]process.Option, error) {
	if serving.MetricsAuthentication != config.MetricsAuthenticationDelegated {
		return nil, nil
	}
	tlsConfig, err := TLSConfig(serving.TLSCertFile, serving.TLSPrivateKeyFile)
	if err != nil {
		return nil, err
	}
	return []process.Option{process.WithProtectedMetrics(tlsConfig, New(client).Wrap)}, nil
}
