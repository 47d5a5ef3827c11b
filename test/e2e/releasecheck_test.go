/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// skopeo is the path of the skopeo binary (Debian's package): .ci/run installs it and sets STEVEDORE_REQUIRE_SKOPEO,
// so that CI fails rather than skips without it.
func skopeo(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("skopeo")
	if err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_SKOPEO") != "" {
			t.Fatal("skopeo is not installed, and STEVEDORE_REQUIRE_SKOPEO says it must be")
		}
		t.Skip("skopeo is not installed (.ci/run installs it from Debian)")
	}
	return path
}

// checkReleaseFromOutside reads a published release back with clients nobody here wrote, and checks it is what
// `make release` wrote in dist: skopeo finds the image index the release's OCI archive names (same digest) with a
// linux/amd64 and a linux/arm64 image; helm pulls both charts byte for byte as SHA256SUMS lists them, at the
// version and appVersion of the release; sha256sum checks every artifact against SHA256SUMS; the release notes are
// the CHANGELOG.md section of the version.
func checkReleaseFromOutside(t *testing.T, helm, prefix, version, dist string) {
	t.Helper()
	semver := strings.TrimPrefix(version, "v")
	ref := "docker://" + prefix + "/scheduler:" + version
	sk := skopeo(t)

	// the image index: the one the archive names
	raw, err := exec.Command(sk, "inspect", "--raw", "--tls-verify=false", ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect --raw %s: %v", ref, err)
	}
	sum := sha256.Sum256(raw)
	pushed := "sha256:" + hex.EncodeToString(sum[:])
	var top ociIndex
	decode(t, readTar(t, filepath.Join(dist, "stevedore-image-"+version+".tar")), "index.json", &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != pushed {
		t.Errorf("the registry serves image index %s; the release's archive names %+v", pushed, top.Manifests)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		out, err := exec.Command(sk, "inspect", "--tls-verify=false", "--override-os", "linux", "--override-arch", arch, ref).Output()
		if err != nil {
			t.Fatalf("skopeo inspect %s for linux/%s: %v", ref, arch, err)
		}
		var img struct {
			Architecture, Os string
			Labels           map[string]string
		}
		if err := json.Unmarshal(out, &img); err != nil {
			t.Fatal(err)
		}
		if img.Os != "linux" || img.Architecture != arch || img.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("skopeo reads the linux/%s image as %s/%s labelled %q, want linux/%s of %s", arch, img.Os, img.Architecture,
				img.Labels["org.opencontainers.image.version"], arch, version)
		}
	}

	// every artifact as SHA256SUMS lists it
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			listed[strings.TrimPrefix(f[1], "*")] = f[0]
		}
	}

	// the charts, pulled back
	pulled := t.TempDir()
	for _, chart := range []string{"stevedore", "stevedore-crd"} {
		if out, err := exec.Command(helm, "pull", "oci://"+prefix+"/"+chart, "--version", semver, "--plain-http", "-d", pulled).CombinedOutput(); err != nil {
			t.Fatalf("helm pull %s: %v\n%s", chart, err, out)
		}
		file := chart + "-" + semver + ".tgz"
		body, err := os.ReadFile(filepath.Join(pulled, file))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		if got := hex.EncodeToString(sum[:]); got != listed[file] {
			t.Errorf("helm pulls %s with sha256 %s; SHA256SUMS lists %q", file, got, listed[file])
		}
		out, err := exec.Command(helm, "show", "chart", filepath.Join(pulled, file)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "\nversion: "+semver+"\n") || !strings.Contains(string(out), "\nappVersion: "+version+"\n") {
			t.Errorf("helm show chart %s (%v):\n%s\nwant version %s, appVersion %s", file, err, out, semver, version)
		}
	}

	// the release notes: the CHANGELOG's section
	notes, err := os.ReadFile(filepath.Join(dist, "RELEASE_NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(changelog), "\n## ["+semver+"]")
	section, _, _ = strings.Cut(section, "\n## [")
	_, section, _ = strings.Cut(section, "\n") // the heading's date
	body := strings.TrimPrefix(string(notes), "# Stevedore "+version+"\n")
	if !strings.HasPrefix(string(notes), "# Stevedore "+version+"\n") || strings.TrimSpace(body) != strings.TrimSpace(section) || section == "" {
		t.Errorf("RELEASE_NOTES.md is not the CHANGELOG.md section of %s:\n%s", semver, lastLines(string(notes), 10))
	}
	if _, ok := listed["RELEASE_NOTES.md"]; !ok {
		t.Error("SHA256SUMS does not list RELEASE_NOTES.md")
	}
}
