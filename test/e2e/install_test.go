package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestInstallManifests installs Stevedore with `kubectl apply -k manifests/` on a sandbox (after a server-side dry
// run), then runs the scheduler binary as the installed Deployment would, with the installed configuration and a
// token of the installed ServiceAccount: a scale-up and a consolidation complete and no request is refused, which
// proves the RBAC is sufficient. (No container runtime exists here: the Deployment's pods are simulated, the
// binary stands in for its container.)
func TestInstallManifests(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	root := repoRoot(t)
	dir := t.TempDir()
	_, kubeconfig, envFile := startSandbox(t, scheduler, dir, "--launch-delay", "500ms")
	k := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	// the sandbox has no Prometheus Operator: stand-ins for its two CRDs
	k("apply", "-f", filepath.Join(root, "test", "e2e", "testdata", "prometheus-operator-crds.yaml"))
	k("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	// a server-side dry run cannot create objects in a namespace it only pretends to create
	k("apply", "-f", filepath.Join(root, "manifests", "deploy", "namespace.yaml"))
	k("apply", "-k", filepath.Join(root, "manifests"), "--dry-run=server")
	k("apply", "-k", filepath.Join(root, "manifests"))
	eventually(t, "the Deployment's two replicas on the two bootstrap nodes", func() error {
		out, err := run(t, nil, kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-n", "stevedore", "-o", "jsonpath={.items[*].spec.nodeName}")
		if err != nil {
			return err
		}
		if nodes := strings.Fields(out); len(nodes) != 2 || nodes[0] == nodes[1] {
			return fmt.Errorf("scheduler pods on %q", out)
		}
		return nil
	})

	// the scheduler as the Deployment runs it: the installed configuration, the ServiceAccount's identity
	token := strings.TrimSpace(k("create", "token", "stevedore", "-n", "stevedore", "--duration", "1h"))
	saConfig := filepath.Join(dir, "sa-kubeconfig")
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saConfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	sak := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, kubectl, append([]string{"--kubeconfig", saConfig}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	sak("config", "set-credentials", "stevedore", "--token", token)
	sak("config", "set-context", "--current", "--user", "stevedore")
	if who := sak("auth", "whoami"); !strings.Contains(who, "system:serviceaccount:stevedore:stevedore") {
		t.Fatalf("the kubeconfig is not the ServiceAccount's:\n%s", who)
	}
	var mu sync.Mutex
	var refused []string
	start(t, readEnvFile(t, envFile), func(line string) {
		if strings.Contains(line, "forbidden") {
			mu.Lock()
			refused = append(refused, line)
			mu.Unlock()
		}
	}, scheduler, "--config", filepath.Join(root, "manifests", "deploy", "scheduler-config.yaml"), "--kubeconfig", saConfig, "--secure-port=0")

	examples := filepath.Join(root, "manifests", "examples")
	k("apply", "-f", filepath.Join(examples, "ec2nodeclasses.yaml"), "-f", filepath.Join(examples, "production.yaml"), "-f", filepath.Join(examples, "inflate.yaml"))
	k("patch", "nodepool", "arm64-spot", "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"5s","budgets":[{"nodes":"100%"}]}}}`)
	k("scale", "deployment", "inflate", "--replicas", "3")
	claims := func(want int) func() error {
		return func() error {
			out, err := run(t, nil, kubectl, "--kubeconfig", kubeconfig, "get", "nodeclaims", "-o", "jsonpath={.items[*].metadata.name}")
			if err != nil {
				return err
			}
			running, err := run(t, nil, kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-l", "app=inflate",
				"--field-selector", "status.phase=Running", "-o", "name")
			if err != nil {
				return err
			}
			if n, r := len(strings.Fields(out)), len(strings.Fields(running)); n != want || r == 0 {
				return fmt.Errorf("%d NodeClaims (want %d), %d inflate pods Running", n, want, r)
			}
			return nil
		}
	}
	eventually(t, "three nodes launched for three inflate pods", claims(3))
	k("scale", "deployment", "inflate", "--replicas", "1")
	eventually(t, "the two emptied nodes consolidated away", claims(1))
	eventually(t, "the NodePool's status (written by the ServiceAccount) to show 1 node and its cost", func() error {
		out, err := run(t, nil, kubectl, "--kubeconfig", kubeconfig, "get", "nodepool", "arm64-spot", "-o", "jsonpath={.status.nodes} {.status.hourlyCost}")
		if err != nil || !strings.HasPrefix(out, "1 0.0") || strings.HasSuffix(out, " 0.0000") {
			return fmt.Errorf("status %q: %w", out, err)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Errorf("the API server refused the ServiceAccount %d times; the RBAC misses rules:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}
