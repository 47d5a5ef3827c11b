/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command image builds Stevedore's container image without a container engine, and pushes it.
//
// The default mode builds: for each architecture, one layer holding the static scheduler binary at /scheduler, the
// build machine's CA certificates and an /etc/passwd entry for the non-root user; the image runs as 65532:65532
// with /scheduler as its entrypoint. The images go into an OCI image index (one manifest per architecture), written
// as an OCI image layout tar archive (unpacked, `crane push <dir>` takes it; `skopeo copy --all oci-archive:...`
// takes the archive).
//
//	go run . --version v0.1.0 --out stevedore-image.tar --binary amd64=../../bin/linux-amd64/scheduler --binary arm64=...
//
// `push` pushes such an archive's image index, every architecture, to a registry with the credentials of the
// Docker configuration (DOCKER_CONFIG, default ~/.docker); a loopback or private registry is spoken to over HTTP.
//
//	go run . push --archive stevedore-image.tar --to registry.example.com/stevedore/scheduler:v0.1.0
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// user is the image's non-root user (distroless's "nonroot").
const user = "65532:65532"

type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaries) Set(v string) error {
	arch, path, ok := strings.Cut(v, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("--binary takes arch=path, not %q", v)
	}
	b[arch] = path
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "push" {
		fs := flag.NewFlagSet("push", flag.ExitOnError)
		archive := fs.String("archive", "stevedore-image.tar", "the OCI image layout tar archive to push")
		to := fs.String("to", "", "the image reference to push to, repository:tag")
		_ = fs.Parse(os.Args[2:])
		digest, err := push(*archive, *to)
		if err != nil {
			fmt.Fprintln(os.Stderr, "image push:", err)
			os.Exit(1)
		}
		fmt.Printf("pushed %s@%s\n", *to, digest)
		return
	}
	bins := binaries{}
	flag.Var(bins, "binary", "arch=path of a static linux scheduler binary (repeatable: one per architecture)")
	version := flag.String("version", "v0.1.0-dev", "the image's version label")
	out := flag.String("out", "stevedore-image.tar", "OCI image layout tar archive to write")
	certs := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put in the image")
	flag.Parse()
	if err := build(bins, *version, *certs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(bins binaries, version, certs, out string) error {
	if len(bins) == 0 {
		return fmt.Errorf("give at least one --binary arch=path")
	}
	ca, err := os.ReadFile(certs)
	if err != nil {
		return fmt.Errorf("reading the CA certificates to ship: %w", err)
	}
	archs := make([]string, 0, len(bins))
	for a := range bins {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		bin, err := os.ReadFile(bins[arch])
		if err != nil {
			return err
		}
		img, err := image(arch, version, bin, ca)
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	dir, err := os.MkdirTemp("", "stevedore-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// index.json names one entry, the multi-arch image index, tagged with the version so tools can address it
	// as oci-archive:stevedore-image.tar:<version>.
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// image is one architecture's image: a single layer with the binary, the CA bundle and /etc/passwd.
func image(arch, version string, bin, ca []byte) (v1.Image, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, ca},
		{"scheduler", 0o755, bin},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: epoch}
	cfg.Config.User = user
	cfg.Config.Entrypoint = []string{"/scheduler"}
	cfg.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": "stevedore", "org.opencontainers.image.version": version}
	return mutate.ConfigFile(img, cfg)
}

// tarDir writes the files under dir into a tar archive at out, paths relative to dir, in a fixed order.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
