// Package main signs and verifies image digests in a registry the way
// `cosign sign --key` and `cosign verify --key` do, with sigstore's Go
// libraries instead of the cosign CLI (whose build pulls in hundreds of
// modules), so make test-release can check the release's signatures end to
// end against a registry on loopback in seconds.
//
// A signature of repo@sha256:HEX is stored as cosign stores it: the tag
// repo:sha256-HEX.sig holds an image with one layer per signature, each layer
// the simple-signing payload (media type
// application/vnd.dev.cosign.simplesigning.v1+json, naming the digest) with
// the base64 signature of that payload in the layer's
// dev.cosignproject.cosign/signature annotation.
package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// signatureTag is where cosign looks for the signatures of a digest.
func signatureTag(d name.Digest) (name.Tag, error) {
	alg, hex, ok := strings.Cut(d.DigestStr(), ":")
	if !ok {
		return name.Tag{}, fmt.Errorf("%s: not a digest reference", d)
	}
	return d.Context().Tag(alg + "-" + hex + ".sig"), nil
}

// signDigest adds a signature of d by signer to d's signature tag.
func signDigest(d name.Digest, signer signature.Signer, opts ...remote.Option) error {
	p, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := signer.SignMessage(bytes.NewReader(p))
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	tag, err := signatureTag(d)
	if err != nil {
		return err
	}
	// Earlier signatures stay: each signer adds a layer, as cosign does.
	base, err := signatures(tag, opts...)
	if err != nil {
		return err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(p, simpleSigningMediaType),
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return fmt.Errorf("writing the signature of %s: %w", d, err)
	}
	return nil
}

// signatures is the signature image at tag, or an empty one where there is
// none yet.
func signatures(tag name.Tag, opts ...remote.Option) (v1.Image, error) {
	img, err := remote.Image(tag, opts...)
	if err == nil {
		return img, nil
	}
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), nil
	}
	return nil, fmt.Errorf("reading %s: %w", tag, err)
}

// verifyDigest returns nil when a signature of d's signature tag verifies
// with verifier and its payload names d's digest.
func verifyDigest(d name.Digest, verifier signature.Verifier, opts ...remote.Option) error {
	tag, err := signatureTag(d)
	if err != nil {
		return err
	}
	img, err := remote.Image(tag, opts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s is not signed: no %s", d, tag.TagStr())
		}
		return fmt.Errorf("reading %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range m.Layers {
		if err := verifyLayer(img, l, d, verifier); err != nil {
			errs = append(errs, fmt.Errorf("layer %s: %w", l.Digest, err))
			continue
		}
		return nil
	}
	return fmt.Errorf("no signature of %s verifies with the key: %w", d, errors.Join(errs...))
}

func verifyLayer(img v1.Image, l v1.Descriptor, d name.Digest, verifier signature.Verifier) error {
	if l.MediaType != simpleSigningMediaType {
		return fmt.Errorf("media type %s, not %s", l.MediaType, simpleSigningMediaType)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[signatureAnnotation])
	if err != nil {
		return fmt.Errorf("annotation %s: %w", signatureAnnotation, err)
	}
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	p, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(p)); err != nil {
		return err
	}
	// Only now is the payload trusted: it must name the digest asked about,
	// or a signature of one image copied beside another would vouch for it.
	var c payload.Cosign
	if err := c.UnmarshalJSON(p); err != nil {
		return err
	}
	if c.Image.DigestStr() != d.DigestStr() {
		return fmt.Errorf("the signed payload names %s", c.Image.DigestStr())
	}
	return nil
}
