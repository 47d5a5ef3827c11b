/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The previous release, and the commit its tag names (for a clone that did not fetch tags).
const (
	previousRelease       = "v0.1.0"
	previousReleaseCommit = "69d84dcceb51fa75c2e0bb7b7e17ec38205b1bab"
)

// buildPreviousRelease extracts the previous release's tree from git and builds its scheduler binary, returning
// the tree and the binary.
func buildPreviousRelease(t *testing.T, root, dir string) (string, string) {
	t.Helper()
	ref := previousRelease
	if err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", previousRelease+"^{commit}").Run(); err != nil {
		ref = previousReleaseCommit
	}
	tree := filepath.Join(dir, previousRelease)
	if err := os.MkdirAll(tree, 0o750); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, previousRelease+".tar")
	if out, err := exec.Command("git", "-C", root, "archive", "--format=tar", "-o", archive, ref).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", ref, err, out)
	}
	if out, err := exec.Command("tar", "-xf", archive, "-C", tree).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	bin := filepath.Join(dir, "scheduler-"+previousRelease)
	build := exec.Command("go", "build", "-trimpath", "-ldflags",
		"-X github.com/stevedore-dev/stevedore/pkg/version.gitVersion="+previousRelease, "-o", bin, "./cmd/scheduler")
	build.Dir = tree
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", previousRelease, err, out)
	}
	return tree, bin
}

// metricsScraper reads a scheduler's /metrics on its secure port; the scheduler runs outside the cluster (no
// delegated authorization), so it is started with /metrics among --authorization-always-allow-paths.
func metricsScraper(port int) func(name string) (float64, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // G402: the scheduler's self-signed serving certificate, on loopback
	return func(series string) (float64, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			if value, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
				return strconv.ParseFloat(value, 64)
			}
		}
		return 0, sc.Err()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestUpgradeFromThePreviousRelease builds the previous release from its tag, installs it into a sandbox that never
// saw Stevedore (with Helm, and with kustomize) and launches three nodes with it; then upgrades to this tree as
// docs/upgrading.md says and runs this tree's scheduler as the upgraded Deployment would. Every NodePool,
// EC2NodeClass, NodeClaim and node is kept: none is deleted or marked Drifted while the new scheduler launches a
// node for a new pod and evaluates drift twice.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	root := repoRoot(t)
	tree, oldScheduler := buildPreviousRelease(t, root, t.TempDir())
	helm := helmBinary(t)
	h := func(in *installed, args ...string) {
		t.Helper()
		out, err := run(in.t, nil, helm, append(args, "--kubeconfig", in.kubeconfig)...)
		if err != nil {
			in.t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Run("helm", func(t *testing.T) {
		upgradeFromPreviousRelease(t, tree, oldScheduler, func(in *installed) {
			// as the previous release's README installed it
			h(in, "install", "stevedore", filepath.Join(tree, "charts", "stevedore"), "-n", "stevedore", "--create-namespace",
				"--set", "settings.clusterName=sandbox", "--set", "settings.disruptionPollInterval=1s")
		}, func(in *installed) {
			for _, crd := range []string{"nodepools", "nodeclaims", "ec2nodeclasses", "nodeoverlays", "capacitybuffers"} {
				in.k("label", "crd", crd+".stevedore.dev", "app.kubernetes.io/managed-by=Helm", "--overwrite")
				in.k("annotate", "crd", crd+".stevedore.dev", "meta.helm.sh/release-name=stevedore-crd", "meta.helm.sh/release-namespace=stevedore", "--overwrite")
			}
			h(in, "upgrade", "--install", "stevedore-crd", filepath.Join(root, "charts", "stevedore-crd"), "-n", "stevedore")
			h(in, "upgrade", "stevedore", filepath.Join(root, "charts", "stevedore"), "-n", "stevedore", "--reset-then-reuse-values")
		})
	})
	t.Run("kustomize", func(t *testing.T) {
		upgradeFromPreviousRelease(t, tree, oldScheduler, func(in *installed) {
			in.k("apply", "-k", filepath.Join(tree, "manifests"))
		}, func(in *installed) {
			in.k("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "manifests", "crds"))
			in.k("apply", "-k", filepath.Join(root, "manifests"))
			in.k("delete", "rolebinding", "stevedore-authentication-reader", "-n", "kube-system")
		})
	})
}

// upgradeFromPreviousRelease installs the previous release (tree, its scheduler binary) with install on a new
// sandbox, launches three nodes, upgrades with upgrade and checks that nothing is replaced.
func upgradeFromPreviousRelease(t *testing.T, tree, oldScheduler string, install, upgrade func(*installed)) {
	dir := t.TempDir()
	current := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	in := &installed{t: t, scheduler: oldScheduler, kubectl: binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl"), root: tree, dir: dir}
	_, in.kubeconfig, in.envFile = startSandbox(t, current, dir, "--launch-delay", "500ms")

	// the previous release with its own examples; consolidation off, drift on
	install(in)
	old := in.runAsServiceAccount("stevedore")
	examples := filepath.Join(tree, "manifests", "examples")
	in.k("apply", "-f", filepath.Join(examples, "ec2nodeclasses.yaml"), "-f", filepath.Join(examples, "production.yaml"), "-f", filepath.Join(examples, "inflate.yaml"))
	for _, pool := range strings.Fields(in.k("get", "nodepools.stevedore.dev", "-o", "name")) {
		in.k("patch", pool, "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"Never"}}}`)
	}
	in.k("scale", "deployment", "inflate", "--replicas", "3")
	eventually(t, "three nodes launched by "+previousRelease, in.claims(3))
	names := func(kinds string) []string {
		out := strings.Fields(in.k("get", kinds, "-o", "name"))
		slices.Sort(out)
		return out
	}
	const kept = "nodepools.stevedore.dev,ec2nodeclasses.stevedore.dev,nodeclaims.stevedore.dev,nodes"
	before := names(kept)

	// the upgrade, as docs/upgrading.md says; the new scheduler replaces the old one as a rollout would
	begin := time.Now()
	upgrade(in)
	if err := old.stop(t); err != nil {
		t.Logf("%s exited with %v after SIGTERM", previousRelease, err)
	}
	in.scheduler = current
	port := freePort(t)
	scrape := metricsScraper(port)
	upgraded := in.runAs("stevedore", "stevedore", fmt.Sprintf("--secure-port=%d", port),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")
	in.k("scale", "deployment", "inflate", "--replicas", "4")
	eventually(t, "a fourth node launched by the upgraded scheduler", in.claims(4))
	took := time.Since(begin)
	eventually(t, "the upgraded scheduler to evaluate drift twice", func() error {
		n, err := scrape(`stevedore_disruption_evaluation_duration_seconds_count{method="drift"}`)
		if err != nil {
			return err
		}
		if n < 2 {
			return fmt.Errorf("drift evaluated %v times", n)
		}
		return nil
	})

	after := names(kept)
	for _, name := range before {
		if !slices.Contains(after, name) {
			t.Errorf("%s did not survive the upgrade", name)
		}
	}
	drifted := in.k("get", "nodeclaims.stevedore.dev", "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=="Drifted")].status}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(drifted), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			t.Errorf("NodeClaim %s is being replaced after the upgrade: %s", f[0], line)
		}
	}
	t.Logf("upgraded %s to this tree in %s (CRDs, install, scheduler restart, a new node launched); kept %d objects: %s",
		previousRelease, took.Round(time.Second), len(before), strings.Join(before, " "))
	if err := upgraded.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	in.checkNothingRefused()
}
