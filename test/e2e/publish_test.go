/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stevedore-dev/stevedore/pkg/version"
)

// releaseVersion is the version the publish test releases: the one this tree is, which CHANGELOG.md has a section
// for (pkg/version's TestEveryShippedDefaultNamesThisRelease).
const releaseVersion = version.Release

// registry is an in-memory OCI registry (bin/registry, go-containerregistry's) listening on 127.0.0.1.
type registry struct {
	t    *testing.T
	host string // 127.0.0.1:<port>
}

func startRegistry(t *testing.T) *registry {
	t.Helper()
	bin := os.Getenv("REGISTRY_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "registry")
		cmd := exec.Command("go", "build", "-o", bin, "./registry")
		cmd.Dir = filepath.Join(repoRoot(t), "hack", "image")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the registry: %v\n%s", err, out)
		}
	}
	addr := make(chan string, 1)
	p := start(t, nil, func(line string) {
		if a, ok := strings.CutPrefix(line, "serving on "); ok {
			addr <- a
		}
	}, bin, "--port", "0")
	select {
	case a := <-addr:
		return &registry{t: t, host: a}
	case err := <-p.waited:
		t.Fatalf("the registry exited: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the registry did not listen within a minute")
	}
	return nil
}

// get fetches a registry path (/v2/...) accepting the given media types, and returns the body.
func (r *registry) get(path string, accept ...string) []byte {
	r.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+r.host+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, a := range accept {
		req.Header.Add("Accept", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
	}
	return body
}

// publishedScheduler reads the image index of repository:tag, checks it holds linux/amd64 and linux/arm64, and
// writes the scheduler binary of this machine's architecture, taken from its image's layer, into dir.
func (r *registry) publishedScheduler(repository, tag, dir string) string {
	t := r.t
	t.Helper()
	var index ociIndex
	raw := r.get("/v2/"+repository+"/manifests/"+tag, "application/vnd.oci.image.index.v1+json")
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	var platforms []string
	var mine string
	for _, m := range index.Manifests {
		if m.Platform == nil {
			continue
		}
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		if m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
			mine = m.Digest
		}
	}
	sort.Strings(platforms)
	if index.MediaType != "application/vnd.oci.image.index.v1+json" || strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Fatalf("%s:%s is a %s of %v, want an OCI image index of linux/amd64 and linux/arm64", repository, tag, index.MediaType, platforms)
	}
	var manifest ociManifest
	if err := json.Unmarshal(r.get("/v2/"+repository+"/manifests/"+mine, "application/vnd.oci.image.manifest.v1+json"), &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("the %s image has %d layers, want 1", runtime.GOARCH, len(manifest.Layers))
	}
	layer := r.get("/v2/" + repository + "/blobs/" + manifest.Layers[0].Digest)
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("the image's layer holds no /scheduler")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "scheduler" {
			continue
		}
		path := filepath.Join(dir, "published-scheduler")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755) //nolint:gosec // G302: an executable the test runs
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // G110: the release's own binary
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// TestAPublishedReleaseInstallsFromItsRegistry publishes a release with `make publish` to a registry on this
// machine, checks the image index holds both architectures, then installs it on a sandbox that never saw Stevedore
// with the commands docs/installation.md gives (CRD chart, then chart, from the registry), and runs the
// published binary (this machine's architecture, taken from the registry) as the installed Deployment would
// through a scale-up. Uninstalling keeps the CRDs and with them the user's objects. The release is signed with a
// key of the test's own: cosign verifies the image, its SBOM attestations and both charts in the registry with the
// release's public key, and refuses them with another key.
func TestAPublishedReleaseInstallsFromItsRegistry(t *testing.T) {
	reg := startRegistry(t)
	helm := helmBinary(t)
	dir := t.TempDir()
	root := repoRoot(t)
	prefix := reg.host + "/stevedore"
	key := cosignKey(t, "release")

	publish := exec.Command("make", "--no-print-directory", "publish", "REGISTRY="+prefix, "VERSION="+releaseVersion)
	publish.Dir = root
	publish.Env = append(os.Environ(), "PLAIN_HTTP=1", "RELEASE_ALLOW_DIRTY=1", "RELEASE_DIR="+filepath.Join(dir, "dist"),
		"HELM_REGISTRY_CONFIG="+filepath.Join(dir, "helm-registry.json"), "DOCKER_CONFIG="+filepath.Join(dir, "docker"),
		"COSIGN_KEY="+key, "COSIGN_PASSWORD=", "COSIGN_TLOG=false")
	if out, err := publish.CombinedOutput(); err != nil {
		t.Fatalf("make publish: %v\n%s", err, lastLines(string(out), 30))
	}
	checkSignatures(t, prefix, filepath.Join(dir, "dist", "cosign.pub"), strings.TrimSuffix(cosignKey(t, "other"), ".key")+".pub")
	checkReleaseFromOutside(t, helm, prefix, releaseVersion, filepath.Join(dir, "dist"))
	scheduler := reg.publishedScheduler("stevedore/scheduler", releaseVersion, dir)
	if out, err := run(t, nil, scheduler, "version"); err != nil || !strings.Contains(out, releaseVersion) {
		t.Fatalf("the published binary's version: %v\n%s", err, out)
	}

	in := &installed{t: t, scheduler: scheduler, kubectl: binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl"), root: root, dir: dir}
	_, in.kubeconfig, in.envFile = startSandbox(t, binary(t, "STEVEDORE_BIN", "./cmd/scheduler"), dir, "--launch-delay", "500ms")
	if out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "crd", "nodepools.stevedore.dev"); err == nil {
		t.Fatalf("the sandbox without its scheduler serves Stevedore's CRDs:\n%s", out)
	}
	h := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, helm, append(args, "--kubeconfig", in.kubeconfig)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	// the README's install lines as written, from this registry (plain HTTP) and with the placeholders filled in
	sh := newDocShell(t, scheduler, in.kubectl, in.kubeconfig)
	writeFile(t, filepath.Join(sh.dir, "path", "helm"), fmt.Sprintf("#!/bin/sh\nexec %q --kubeconfig %q \"$@\"\n", helm, in.kubeconfig))
	if err := os.Chmod(filepath.Join(sh.dir, "path", "helm"), 0o700); err != nil { //nolint:gosec // G302: a script the test runs
		t.Fatal(err)
	}
	readme := strings.NewReplacer("oci://public.ecr.aws/stevedore/", "oci://"+prefix+"/", "helm upgrade --install", "helm upgrade --install --plain-http",
		"<cluster>", "sandbox", "<region>", "us-east-1", "<controller role ARN>", "arn:aws:iam::111122223333:role/stevedore").
		Replace(shellBlock(t, "README.md", "2. **Install**"))
	if out, err := runIn(t, sh.dir, sh.env, "sh", "-e", "-c", readme); err != nil {
		t.Fatalf("the README's install lines:\n%s\n%v\n%s", readme, err, lastLines(out, 20))
	}
	if image := in.k("get", "deployment", "stevedore", "-n", "stevedore", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); image != prefix+"/scheduler:"+releaseVersion {
		t.Errorf("the installed Deployment runs %q, want the published %s/scheduler:%s", image, prefix, releaseVersion)
	}
	sched := in.runAsServiceAccount("stevedore")
	in.applyExamples()
	in.k("scale", "deployment", "inflate", "--replicas", "2")
	eventually(t, "two nodes launched for two inflate pods by the published release", in.claims(2))
	in.removeExamples()
	if err := sched.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	h("uninstall", "stevedore", "-n", "stevedore", "--wait")
	h("uninstall", "stevedore-crd", "-n", "stevedore", "--wait")
	in.k("get", "crd", "nodepools.stevedore.dev", "nodeclaims.stevedore.dev") // helm.sh/resource-policy: keep
	in.checkNothingRefused()
}

// checkSignatures verifies with cosign, against the registry, the signatures of the published image and charts and
// the image's CycloneDX SBOM attestations with the release's public key, and checks that another key verifies none
// of them.
func checkSignatures(t *testing.T, prefix, pub, otherPub string) {
	t.Helper()
	insecure := []string{"--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry"}
	semver := strings.TrimPrefix(releaseVersion, "v")
	refs := []string{prefix + "/scheduler:" + releaseVersion, prefix + "/stevedore:" + semver, prefix + "/stevedore-crd:" + semver}
	for _, ref := range refs {
		if out, err := run(t, nil, cosignBinary(t), append([]string{"verify", "--key", pub}, append(insecure, ref)...)...); err != nil {
			t.Errorf("cosign verify %s: %v\n%s", ref, err, lastLines(out, 10))
		}
		if _, err := run(t, nil, cosignBinary(t), append([]string{"verify", "--key", otherPub}, append(insecure, ref)...)...); err == nil {
			t.Errorf("cosign verified %s with a key that did not sign it", ref)
		}
	}
	out, err := run(t, nil, cosignBinary(t), append([]string{"verify-attestation", "--key", pub, "--type", "cyclonedx"}, append(insecure, refs[0])...)...)
	if err != nil {
		t.Fatalf("cosign verify-attestation %s: %v\n%s", refs[0], err, lastLines(out, 10))
	}
	// one attestation per architecture, each a base64 DSSE payload whose predicate is the binary's SBOM
	if n := strings.Count(out, `"payloadType":"application/vnd.in-toto+json"`); n != 2 {
		t.Errorf("%d SBOM attestations on %s, want one for each of amd64 and arm64:\n%s", n, refs[0], lastLines(out, 5))
	}
}

// cosignKey generates a cosign key pair (no password) named name in a directory of the test's and returns the
// private key's path; the public key is beside it (.pub).
func cosignKey(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(cosignBinary(t), "generate-key-pair", "--output-key-prefix", filepath.Join(dir, name)) //nolint:gosec // G204: the test's own directory
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return filepath.Join(dir, name+".key")
}

// cosignBinary is $COSIGN (make test sets it), else bin/cosign (make bin/cosign builds it).
func cosignBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("COSIGN"); bin != "" {
		return bin
	}
	bin := filepath.Join(repoRoot(t), "bin", "cosign")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no cosign: set COSIGN or run make bin/cosign (%v)", err)
	}
	return bin
}
