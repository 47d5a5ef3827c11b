/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push unpacks an OCI image layout archive and pushes the one image index it holds to the reference to, with
// every architecture's image. It returns the digest of the pushed index.
func push(archive, to string) (string, error) {
	if to == "" {
		return "", errors.New("--to names the image to push to (repository:tag)")
	}
	ref, err := name.ParseReference(to)
	if err != nil {
		return "", fmt.Errorf("--to %q: %w", to, err)
	}
	dir, err := os.MkdirTemp("", "stevedore-push-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := untar(archive, dir); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", archive, err)
	}
	lp, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("%s is not an OCI image layout: %w", archive, err)
	}
	manifest, err := lp.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(manifest.Manifests) != 1 || !manifest.Manifests[0].MediaType.IsIndex() {
		return "", fmt.Errorf("%s holds %d entries, want one multi-architecture image index", archive, len(manifest.Manifests))
	}
	index, err := lp.ImageIndex(manifest.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, index, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("pushing to %s: %w", ref, err)
	}
	digest, err := index.Digest()
	if err != nil {
		return "", err
	}
	return digest.String(), nil
}

// untar writes the regular files of a tar archive under dir, refusing paths that leave it.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive's directory", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr) //nolint:gosec // G110: the release's own archive
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
