/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package release checks `make release`: every artifact it makes names the version it was given.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const version = "v0.1.0"

// TestMakeReleaseNamesOneVersionEverywhere runs `make release VERSION=v0.1.0` (one image architecture, to keep
// the test short; the release itself builds amd64 and arm64) with a signing key of its own, and reads every
// artifact back: the image archive's tag, the chart's version, appVersion and image, the CRDs, the kustomize base's
// image, the Terraform module's default image and the chart it installs, the SBOM, the release notes, the
// checksums, and their signature, which cosign verifies with the public key shipped beside them (and refuses for
// checksums changed after signing).
func TestMakeReleaseNamesOneVersionEverywhere(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	key := signingKey(t)
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+version, "IMAGE_ARCHS=amd64")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RELEASE_DIR="+out, "RELEASE_ALLOW_DIRTY=1", "IMAGE_REPOSITORY=registry.example.com/stevedore",
		"COSIGN_KEY="+key, "COSIGN_PASSWORD=", "COSIGN_TLOG=false")
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, log)
	}
	image := "registry.example.com/stevedore:" + version

	// the image archive: an OCI layout whose index names the version
	index := fileInTar(t, filepath.Join(out, "stevedore-image-"+version+".tar"), "index.json", false)
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Errorf("image index %s (%v), want one image tagged %s", index, err, version)
	}

	// the chart
	chart := filepath.Join(out, "stevedore-"+strings.TrimPrefix(version, "v")+".tgz")
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(fileInTar(t, chart, "stevedore/Chart.yaml", true), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != strings.TrimPrefix(version, "v") || meta.AppVersion != version {
		t.Errorf("chart version %q appVersion %q, want %q and %q", meta.Version, meta.AppVersion, strings.TrimPrefix(version, "v"), version)
	}
	if values := string(fileInTar(t, chart, "stevedore/values.yaml", true)); !strings.Contains(values, "\nimage: "+image+"\n") {
		t.Errorf("the chart's values do not name the image %s", image)
	}

	// the CRDs
	crds, err := os.ReadFile(filepath.Join(out, "stevedore-crds-"+version+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay", "CapacityBuffer"} {
		if !strings.Contains(string(crds), "    kind: "+kind+"\n") {
			t.Errorf("the CRDs lack %s", kind)
		}
	}

	// the kustomize base and the Terraform module
	deployment := string(fileInTar(t, filepath.Join(out, "stevedore-manifests-"+version+".tar.gz"), "manifests/deploy/deployment.yaml", true))
	if !strings.Contains(deployment, "image: "+image) {
		t.Errorf("the kustomize base's Deployment does not run %s", image)
	}
	tf := filepath.Join(out, "stevedore-terraform-"+version+".tar.gz")
	if !strings.Contains(string(fileInTar(t, tf, "deploy/terraform/variables.tf", true)), `"`+image+`"`) {
		t.Errorf("the Terraform module's default image is not %s", image)
	}
	if !strings.Contains(string(fileInTar(t, tf, "charts/stevedore/values.yaml", true)), "image: "+image) {
		t.Errorf("the chart the Terraform module installs does not name %s", image)
	}
	fileInTar(t, tf, "deploy/iam/stevedore-controller-policy.json", true)

	// the notes and the checksums
	notes, err := os.ReadFile(filepath.Join(out, "RELEASE_NOTES.md"))
	if err != nil || !strings.HasPrefix(string(notes), "# Stevedore "+version+"\n") || !strings.Contains(string(notes), "### Added") {
		t.Errorf("release notes %q (%v)", notes, err)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	entries, _ := os.ReadDir(out)
	if len(lines) != len(entries)-3 { // all but SHA256SUMS, its signature and the public key
		t.Errorf("%d checksums for %d artifacts", len(lines), len(entries)-3)
	}
	for _, line := range lines {
		sum, name, _ := strings.Cut(line, "  ")
		raw, err := os.ReadFile(filepath.Join(out, name)) //nolint:gosec // G703: a name from the SHA256SUMS the release build just wrote into the test's own directory
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(raw)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("checksum of %s does not match", name)
		}
	}

	// the SBOM: every module of the amd64 binary, the Kubernetes and AWS SDK ones among them
	checkSBOM(t, filepath.Join(out, "stevedore-sbom-"+version+"-linux-amd64.cdx.json"))

	// the signature of the checksums, verified by cosign with the public key of the release
	pub := filepath.Join(out, "cosign.pub")
	if want, got := readFile(t, strings.TrimSuffix(key, ".key")+".pub"), readFile(t, pub); !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)) {
		t.Errorf("cosign.pub is not the signing key's public key:\n%s", got)
	}
	verify := func(sums string) error {
		out, err := exec.Command(cosign(t), "verify-blob", "--key", pub, "--signature", filepath.Join(out, "SHA256SUMS.sig"), //nolint:gosec // G204: the test's own files
			"--insecure-ignore-tlog", sums).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := verify(filepath.Join(out, "SHA256SUMS")); err != nil {
		t.Errorf("cosign verify-blob SHA256SUMS: %v", err)
	}
	tampered := filepath.Join(t.TempDir(), "SHA256SUMS")
	if err := os.WriteFile(tampered, append(sums, "0000  extra\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verify(tampered); err == nil {
		t.Error("cosign verified checksums changed after they were signed")
	}
}

// checkSBOM reads a CycloneDX SBOM of the scheduler binary of the release.
func checkSBOM(t *testing.T, path string) {
	t.Helper()
	var sbom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct{ Name, Version string } `json:"components"`
	}
	if err := json.Unmarshal(readFile(t, path), &sbom); err != nil {
		t.Fatalf("the SBOM: %v", err)
	}
	if sbom.BOMFormat != "CycloneDX" || sbom.Metadata.Component.Name != "github.com/stevedore-dev/stevedore" || sbom.Metadata.Component.Version != version {
		t.Errorf("the SBOM is a %q of %s %s, want CycloneDX of github.com/stevedore-dev/stevedore %s", sbom.BOMFormat,
			sbom.Metadata.Component.Name, sbom.Metadata.Component.Version, version)
	}
	found := map[string]string{}
	for _, c := range sbom.Components {
		found[c.Name] = c.Version
	}
	for _, module := range []string{"k8s.io/kubernetes", "github.com/aws/aws-sdk-go-v2/service/ec2", "k8s.io/client-go"} {
		if found[module] == "" {
			t.Errorf("the SBOM lists no %s among its %d components", module, len(sbom.Components))
		}
	}
}

// signingKey generates a cosign key pair (no password) and returns the private key's path; the public key is
// beside it (.pub).
func signingKey(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(cosign(t), "generate-key-pair", "--output-key-prefix", filepath.Join(dir, "release")) //nolint:gosec // G204: the test's own directory
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return filepath.Join(dir, "release.key")
}

// cosign is the cosign binary: $COSIGN (make test sets it), else bin/cosign (make bin/cosign builds it).
func cosign(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("COSIGN"); bin != "" {
		return bin
	}
	bin, err := filepath.Abs("../../bin/cosign")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no cosign: set COSIGN or run make bin/cosign (%v)", err)
	}
	return bin
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the test's own files
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestMakeReleaseRefusesAnUnsignedRelease: without a signing key, a release is built only when asked to be unsigned.
func TestMakeReleaseRefusesAnUnsignedRelease(t *testing.T) {
	cmd := exec.Command("bash", "hack/release.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION="+version, "RELEASE_ALLOW_DIRTY=1", "RELEASE_DIR="+t.TempDir(), "COSIGN_KEY=")
	log, err := cmd.CombinedOutput()
	if want := "COSIGN_KEY names no signing key"; err == nil || !strings.Contains(string(log), want) {
		t.Errorf("release.sh without COSIGN_KEY: %v\n%s\nwant a refusal saying %q", err, log, want)
	}
}

func TestMakeReleaseRefusesAVersionItCannotName(t *testing.T) {
	for _, v := range []string{"0.1.0", "v1", "latest", "v9.9.9"} {
		cmd := exec.Command("bash", "hack/release.sh")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "VERSION="+v, "RELEASE_ALLOW_DIRTY=1", "RELEASE_DIR="+t.TempDir())
		log, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("VERSION=%s: released", v)
			continue
		}
		want := "VERSION must be a semantic version"
		if v == "v9.9.9" {
			want = "CHANGELOG.md has no section"
		}
		if !strings.Contains(string(log), want) {
			t.Errorf("VERSION=%s: %s, want it to say %q", v, log, want)
		}
	}
}

// fileInTar returns the content of name in a tar archive (gzipped when gz).
func fileInTar(t *testing.T, archive, name string, gz bool) []byte {
	t.Helper()
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = bytes.NewReader(raw)
	if gz {
		if r, err = gzip.NewReader(r); err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", filepath.Base(archive), name)
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
