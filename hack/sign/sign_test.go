package main

import (
	"crypto"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
)

// pushed pushes a random image index to a registry on loopback under
// nodehealth/<repo>:v1 and returns its digest reference.
func pushed(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	idx, err := random.Index(64, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host + "/nodehealth/" + repo + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return tag.Digest(h.String())
}

func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func newKey(t *testing.T) *signature.ECDSASignerVerifier {
	t.Helper()
	sv, _, err := signature.NewECDSASignerVerifier(elliptic.P256(), rand.Reader, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

func TestADigestSignedWithAKeyVerifiesWithThatKey(t *testing.T) {
	d := pushed(t, newRegistry(t), "controller")
	key := newKey(t)
	if err := signDigest(d, key); err != nil {
		t.Fatal(err)
	}
	if err := verifyDigest(d, key); err != nil {
		t.Errorf("the signed digest does not verify with its key: %v", err)
	}
}

func TestADigestSignedWithAnotherKeyFailsVerification(t *testing.T) {
	d := pushed(t, newRegistry(t), "controller")
	if err := signDigest(d, newKey(t)); err != nil {
		t.Fatal(err)
	}
	if err := verifyDigest(d, newKey(t)); err == nil {
		t.Error("a digest signed with another key verified")
	}
}

func TestAnUnsignedDigestFailsVerification(t *testing.T) {
	host := newRegistry(t)
	key := newKey(t)
	signed := pushed(t, host, "controller")
	if err := signDigest(signed, key); err != nil {
		t.Fatal(err)
	}
	// In the same repository as a signed digest, and in another.
	for _, d := range []name.Digest{pushed(t, host, "controller"), pushed(t, host, "agent")} {
		if err := verifyDigest(d, key); err == nil {
			t.Errorf("unsigned %s verified", d)
		}
	}
}

// A valid signature of one digest, stored as another digest's signature
// (which a registry writer can do), does not make that one verify: the
// payload names the digest signed.
func TestASignatureMovedToAnotherDigestFailsVerification(t *testing.T) {
	host := newRegistry(t)
	key := newKey(t)
	a, b := pushed(t, host, "controller"), pushed(t, host, "controller")
	if err := signDigest(a, key); err != nil {
		t.Fatal(err)
	}
	from, err := signatureTag(a)
	if err != nil {
		t.Fatal(err)
	}
	to, err := signatureTag(b)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(to, img); err != nil {
		t.Fatal(err)
	}
	if err := verifyDigest(b, key); err == nil {
		t.Error("a's signature made b verify")
	}
}

// A second signature is added beside the first, as cosign does: either key
// verifies.
func TestASecondSignatureKeepsTheFirst(t *testing.T) {
	d := pushed(t, newRegistry(t), "controller")
	k1, k2 := newKey(t), newKey(t)
	for _, k := range []signature.Signer{k1, k2} {
		if err := signDigest(d, k); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range []signature.Verifier{k1, k2} {
		if err := verifyDigest(d, k); err != nil {
			t.Errorf("key %d: %v", i+1, err)
		}
	}
}

// What cosign verify --key reads: the tag sha256-<hex>.sig in the image's
// repository, a layer of the simple-signing media type whose content is the
// payload naming the digest, and the payload's signature, base64, in the
// layer's annotation.
func TestTheSignatureIsStoredWhereAndAsCosignReadsIt(t *testing.T) {
	d := pushed(t, newRegistry(t), "controller")
	key := newKey(t)
	if err := signDigest(d, key); err != nil {
		t.Fatal(err)
	}
	tag, err := signatureTag(d)
	if err != nil {
		t.Fatal(err)
	}
	want := d.Context().Name() + ":sha256-" + strings.TrimPrefix(d.DigestStr(), "sha256:") + ".sig"
	if tag.Name() != want {
		t.Fatalf("signature tag %s, want %s", tag.Name(), want)
	}
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatalf("no signature image at %s: %v", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(m.Layers))
	}
	l := m.Layers[0]
	if l.MediaType != simpleSigningMediaType {
		t.Errorf("layer media type %s, want %s", l.MediaType, simpleSigningMediaType)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[signatureAnnotation])
	if err != nil || len(sig) == 0 {
		t.Fatalf("annotation %s: %q (%v)", signatureAnnotation, l.Annotations[signatureAnnotation], err)
	}
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var p struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			} `json:"image"`
			Type string `json:"type"`
		} `json:"critical"`
	}
	raw := new(strings.Builder)
	if err := json.NewDecoder(io.TeeReader(rc, raw)).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Critical.Type != "cosign container image signature" || p.Critical.Image.DockerManifestDigest != d.DigestStr() ||
		p.Critical.Identity.DockerReference != d.Context().Name() {
		t.Errorf("payload %s", raw)
	}
	if err := key.VerifySignature(strings.NewReader(string(sig)), strings.NewReader(raw.String())); err != nil {
		t.Errorf("the annotation is not the payload's signature: %v", err)
	}
}
