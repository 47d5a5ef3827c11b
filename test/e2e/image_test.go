/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// ociDescriptor, ociIndex, ociManifest and ociConfig are the parts of the OCI image spec the test reads.
type ociDescriptor struct {
	MediaType   string                             `json:"mediaType"`
	Digest      string                             `json:"digest"`
	Platform    *struct{ OS, Architecture string } `json:"platform,omitempty"`
	Annotations map[string]string                  `json:"annotations,omitempty"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// TestImage builds the image the way `make image` does (hack/image, no container engine) from the scheduler binary
// under test, then opens the archive with nothing but the standard library: an OCI layout whose index names one
// manifest per architecture, each image running /scheduler as the non-root user, its single layer holding the
// static binary and the CA bundle; the binary taken out of the image prints its version.
func TestImage(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	dir := t.TempDir()
	archive := filepath.Join(dir, "stevedore-image.tar")
	arch := runtime.GOARCH
	cmd := exec.Command("go", "run", ".", "--version", "v9.9.9-test", "--out", archive, "--binary", arch+"="+scheduler)
	cmd.Dir = filepath.Join(repoRoot(t), "hack", "image")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the image: %v\n%s", err, out)
	}

	blobs := readTar(t, archive)
	var layout struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	decode(t, blobs, "oci-layout", &layout)
	if layout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout version %q, want 1.0.0", layout.ImageLayoutVersion)
	}
	var top ociIndex
	decode(t, blobs, "index.json", &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the one image index", len(top.Manifests))
	}
	if ref := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "v9.9.9-test" {
		t.Errorf("index.json entry ref.name %q, want the version v9.9.9-test", ref)
	}
	var index ociIndex
	decode(t, blobs, blobPath(top.Manifests[0].Digest), &index)
	if index.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("image index media type %q", index.MediaType)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Platform == nil ||
		index.Manifests[0].Platform.OS != "linux" || index.Manifests[0].Platform.Architecture != arch {
		t.Fatalf("image index manifests %+v, want one for linux/%s", index.Manifests, arch)
	}

	var manifest ociManifest
	decode(t, blobs, blobPath(index.Manifests[0].Digest), &manifest)
	var config ociConfig
	decode(t, blobs, blobPath(manifest.Config.Digest), &config)
	if config.OS != "linux" || config.Architecture != arch {
		t.Errorf("config platform %s/%s, want linux/%s", config.OS, config.Architecture, arch)
	}
	if config.Config.User != "65532:65532" {
		t.Errorf("image user %q, want the non-root 65532:65532", config.Config.User)
	}
	if strings.Join(config.Config.Entrypoint, " ") != "/scheduler" {
		t.Errorf("entrypoint %q, want [/scheduler]", config.Config.Entrypoint)
	}
	if v := config.Config.Labels["org.opencontainers.image.version"]; v != "v9.9.9-test" {
		t.Errorf("version label %q, want v9.9.9-test", v)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(manifest.Layers))
	}

	files := readLayer(t, blobs[blobPath(manifest.Layers[0].Digest)])
	for _, name := range []string{"scheduler", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
		if _, ok := files[name]; !ok {
			t.Errorf("layer lacks %s (has %v)", name, keys(files))
		}
	}
	if !strings.Contains(string(files["etc/passwd"].data), ":65532:65532:") {
		t.Errorf("/etc/passwd has no entry for uid 65532")
	}
	bin := files["scheduler"]
	if bin.mode&0o111 == 0 {
		t.Errorf("/scheduler mode %o is not executable", bin.mode)
	}
	extracted := filepath.Join(dir, "scheduler")
	if err := os.WriteFile(extracted, bin.data, 0o700); err != nil { //nolint:gosec // G306: the binary is run below, so it needs its owner's execute bit
		t.Fatal(err)
	}
	if dynamic, err := isDynamic(extracted); err != nil || dynamic {
		t.Errorf("/scheduler must be a static binary (distroless-static style image): dynamic=%v err=%v", dynamic, err)
	}
	out, err := run(t, nil, extracted, "version")
	if err != nil {
		t.Fatalf("the binary from the image: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "Stevedore ") || !strings.Contains(out, "for linux/"+arch) {
		t.Errorf("version output %q", out)
	}
}

// readTar returns the regular files of a tar archive by name.
func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := map[string]layerFile{}
	if err := walkTar(f, files); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make(map[string][]byte, len(files))
	for name, lf := range files {
		out[name] = lf.data
	}
	return out
}

type layerFile struct {
	mode int64
	data []byte
}

// readLayer returns the files of a layer blob, gzip-compressed or not.
func readLayer(t *testing.T, blob []byte) map[string]layerFile {
	t.Helper()
	var r io.Reader = bytes.NewReader(blob)
	if len(blob) > 2 && blob[0] == 0x1f && blob[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	files := map[string]layerFile{}
	if err := walkTar(r, files); err != nil {
		t.Fatalf("layer: %v", err)
	}
	return files
}

func walkTar(r io.Reader, into map[string]layerFile) error {
	tr := tar.NewReader(r)
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
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		into[strings.TrimPrefix(h.Name, "./")] = layerFile{mode: h.Mode, data: data}
	}
}

func decode(t *testing.T, blobs map[string][]byte, name string, into any) {
	t.Helper()
	raw, ok := blobs[name]
	if !ok {
		t.Fatalf("the archive has no %s (has %v)", name, keys(blobs))
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// blobPath is where an OCI layout keeps the blob with this digest.
func blobPath(digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return fmt.Sprintf("blobs/%s/%s", algo, hex)
}

// isDynamic reports whether an ELF binary asks for a dynamic loader.
func isDynamic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
