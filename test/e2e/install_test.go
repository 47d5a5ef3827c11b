/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// installed is a sandbox with the admin kubeconfig, and the scheduler binary to run as an installed Deployment.
type installed struct {
	t                        *testing.T
	scheduler, kubectl       string
	dir, kubeconfig, envFile string
	root                     string
	refusedMu                sync.Mutex
	refused                  []string
}

// k runs kubectl as the sandbox's admin and fails the test on an error.
func (in *installed) k(args ...string) string {
	in.t.Helper()
	out, err := run(in.t, nil, in.kubectl, append([]string{"--kubeconfig", in.kubeconfig}, args...)...)
	if err != nil {
		in.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// runAsServiceAccount runs the scheduler binary as the Deployment in namespace ns would: the configuration of
// the installed ConfigMap, a token of the installed ServiceAccount. Every "forbidden" line it logs is kept.
func (in *installed) runAsServiceAccount(ns string) *process {
	return in.runAs(ns, "stevedore")
}

// runAs is runAsServiceAccount for a ServiceAccount of another name, with extra scheduler arguments (later ones
// win over earlier ones: --secure-port to scrape its metrics).
func (in *installed) runAs(ns, serviceAccount string, extra ...string) *process {
	t := in.t
	t.Helper()
	config := filepath.Join(in.dir, ns+"-scheduler-config.yaml")
	cms := strings.Fields(in.k("get", "configmaps", "-n", ns, "-o", "name"))
	var cm string
	for _, name := range cms {
		if strings.HasPrefix(name, "configmap/stevedore-scheduler-config") {
			cm = name
		}
	}
	if cm == "" {
		t.Fatalf("no stevedore-scheduler-config ConfigMap in %s: %v", ns, cms)
	}
	writeFile(t, config, in.k("get", cm, "-n", ns, "-o", `jsonpath={.data.scheduler-config\.yaml}`))
	token := strings.TrimSpace(in.k("create", "token", serviceAccount, "-n", ns, "--duration", "1h"))
	saConfig := filepath.Join(in.dir, ns+"-sa-kubeconfig")
	raw, err := os.ReadFile(in.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saConfig, raw, 0o600); err != nil { //nolint:gosec // G703: a file the test names in its own directory
		t.Fatal(err)
	}
	sak := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, in.kubectl, append([]string{"--kubeconfig", saConfig}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	sak("config", "set-credentials", "stevedore", "--token", token)
	sak("config", "set-context", "--current", "--user", "stevedore")
	if who := sak("auth", "whoami"); !strings.Contains(who, "system:serviceaccount:"+ns+":"+serviceAccount) {
		t.Fatalf("the kubeconfig is not the ServiceAccount's:\n%s", who)
	}
	// the Deployment sets STEVEDORE_NAMESPACE from the pod's namespace: the lease's namespace
	env := append(readEnvFile(t, in.envFile), "STEVEDORE_NAMESPACE="+ns)
	return start(t, env, func(line string) {
		if strings.Contains(line, "forbidden") {
			in.refusedMu.Lock()
			in.refused = append(in.refused, line)
			in.refusedMu.Unlock()
		}
	}, in.scheduler, append([]string{"--config", config, "--kubeconfig", saConfig, "--secure-port=0"}, extra...)...)
}

// claims waits for want NodeClaims and at least one Running inflate pod.
func (in *installed) claims(want int) func() error {
	return func() error {
		out, err := run(in.t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "nodeclaims.stevedore.dev", "-o", "jsonpath={.items[*].metadata.name}")
		if err != nil {
			return err
		}
		running, err := run(in.t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "pods", "-l", "app=inflate",
			"--field-selector", "status.phase=Running", "-o", "name")
		if err != nil {
			return err
		}
		if n, r := len(strings.Fields(out)), len(strings.Fields(running)); n != want || (want > 0 && r == 0) {
			return fmt.Errorf("%d NodeClaims (want %d), %d inflate pods Running", n, want, r)
		}
		return nil
	}
}

// applyExamples applies the example node classes, NodePools and the inflate Deployment, the NodePool arm64-spot
// consolidating after 5 s.
func (in *installed) applyExamples() {
	examples := filepath.Join(in.root, "manifests", "examples")
	in.k("apply", "-f", filepath.Join(examples, "ec2nodeclasses.yaml"), "-f", filepath.Join(examples, "production.yaml"), "-f", filepath.Join(examples, "inflate.yaml"))
	in.k("patch", "nodepools.stevedore.dev", "arm64-spot", "--type", "merge", "-p", `{"spec":{"disruption":{"consolidateAfter":"5s","budgets":[{"nodes":"100%"}]}}}`)
}

// removeExamples scales inflate to 0 and deletes the examples while the scheduler still runs (their NodeClaims
// carry its finalizer), waiting until no NodeClaim is left.
func (in *installed) removeExamples() {
	examples := filepath.Join(in.root, "manifests", "examples")
	in.k("delete", "-f", filepath.Join(examples, "inflate.yaml"), "--wait")
	in.k("delete", "-f", filepath.Join(examples, "production.yaml"), "-f", filepath.Join(examples, "ec2nodeclasses.yaml"), "--wait", "--timeout=2m")
	eventually(in.t, "every NodeClaim gone", in.claims(0))
}

func (in *installed) checkNothingRefused() {
	in.refusedMu.Lock()
	defer in.refusedMu.Unlock()
	if len(in.refused) > 0 {
		in.t.Errorf("the API server refused the ServiceAccount %d times; the RBAC misses rules:\n%s", len(in.refused), strings.Join(in.refused, "\n"))
	}
}

// TestInstallManifests installs Stevedore on a sandbox without the Prometheus Operator, as the README says, both
// ways in turn: `kubectl apply -k manifests/` (after a server-side dry run), then `kubectl delete -k`; then
// `helm install --create-namespace` into another namespace, `helm upgrade` with a changed setting, and
// `helm uninstall`. After each install the scheduler binary runs as the installed Deployment would, with the
// installed configuration and a token of the installed ServiceAccount: a scale-up (and, after the kustomize
// install, a consolidation) completes and no request is refused, which proves the RBAC is sufficient. The
// monitoring overlay is applied once the Prometheus Operator's CRDs are there. (No container runtime exists
// here: the Deployment's pods are simulated, the binary stands in for its container.)
func TestInstallManifests(t *testing.T) {
	in := &installed{t: t, scheduler: binary(t, "STEVEDORE_BIN", "./cmd/scheduler"),
		kubectl: binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl"), root: repoRoot(t), dir: t.TempDir()}
	helm := helmBinary(t)
	_, in.kubeconfig, in.envFile = startSandbox(t, in.scheduler, in.dir, "--launch-delay", "500ms")
	manifests := filepath.Join(in.root, "manifests")

	// Helm, into a namespace of the user's choice that does not exist yet
	chart := filepath.Join(in.root, "charts", "stevedore")
	h := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, helm, append(args, "--kubeconfig", in.kubeconfig)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	// the README's line, every value set otherwise than its default
	h("install", "stevedore", chart, "-n", "autoscaling", "--create-namespace", "--set", "settings.clusterName=sandbox",
		"-f", filepath.Join(in.root, "test", "e2e", "testdata", "chart-values.yaml"))
	if env := in.k("get", "deployment", "stevedore", "-n", "autoscaling", "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="STEVEDORE_NAMESPACE")].valueFrom.fieldRef.fieldPath}`); env != "metadata.namespace" {
		t.Errorf("the Deployment does not give the scheduler its namespace (the lease's): %q", env)
	}
	template := func() string {
		return in.k("get", "deployment", "stevedore", "-n", "autoscaling", "-o", `jsonpath={.spec.template.metadata.annotations.checksum/config}`)
	}
	before := template()
	scheduler := in.runAs("autoscaling", "autoscaler")
	in.applyExamples()
	in.k("scale", "deployment", "inflate", "--replicas", "2")
	eventually(t, "two nodes launched for two inflate pods (Helm install)", in.claims(2))
	h("upgrade", "stevedore", chart, "-n", "autoscaling", "--reset-then-reuse-values", "--set", "settings.batchMaxDuration=5s")
	if after := template(); after == before || after == "" {
		t.Errorf("helm upgrade with a new setting left the pod template's checksum/config at %q: the Deployment does not roll", after)
	}
	if config := in.k("get", "configmaps", "-n", "autoscaling", "stevedore-scheduler-config", "-o", `jsonpath={.data.scheduler-config\.yaml}`); !strings.Contains(config, "batchMaxDuration: 5s") {
		t.Errorf("helm upgrade did not change the configuration:\n%s", config)
	}
	in.removeExamples()
	if err := scheduler.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	h("uninstall", "stevedore", "-n", "autoscaling", "--wait")
	left := in.k("get", "deployments,serviceaccounts,configmaps,services,poddisruptionbudgets", "-n", "autoscaling", "-o", "name")
	for _, name := range strings.Fields(left) {
		if strings.Contains(name, "stevedore") || strings.Contains(name, "autoscaler") {
			t.Errorf("helm uninstall left %s behind", name)
		}
	}
	if out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "mutatingadmissionpolicies", "stevedore-scheduling"); err == nil {
		t.Errorf("helm uninstall left the admission policy behind:\n%s", out)
	}
	in.k("get", "crd", "nodepools.stevedore.dev") // Helm keeps the CRDs of a chart's crds/ folder, and the user's NodePools with them
	in.k("delete", "namespace", "autoscaling", "--wait")

	// kustomize: a server-side dry run cannot create objects in a namespace it only pretends to create
	in.k("apply", "-f", filepath.Join(manifests, "deploy", "namespace.yaml"))
	in.k("apply", "-k", manifests, "--dry-run=server")
	in.k("apply", "-k", manifests)
	eventually(t, "the Deployment's two replicas on the two bootstrap nodes", func() error {
		out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "pods", "-n", "stevedore", "-o", "jsonpath={.items[*].spec.nodeName}")
		if err != nil {
			return err
		}
		if nodes := strings.Fields(out); len(nodes) != 2 || nodes[0] == nodes[1] {
			return fmt.Errorf("scheduler pods on %q", out)
		}
		return nil
	})
	scheduler = in.runAsServiceAccount("stevedore")
	in.applyExamples()
	in.k("scale", "deployment", "inflate", "--replicas", "3")
	eventually(t, "three nodes launched for three inflate pods", in.claims(3))
	in.k("scale", "deployment", "inflate", "--replicas", "1")
	eventually(t, "the two emptied nodes consolidated away", in.claims(1))
	eventually(t, "the NodePool's status (written by the ServiceAccount) to show 1 node and its cost", func() error {
		out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "nodepools.stevedore.dev", "arm64-spot", "-o", "jsonpath={.status.nodes} {.status.hourlyCost}")
		if err != nil || !strings.HasPrefix(out, "1 0.0") || strings.HasSuffix(out, " 0.0000") {
			return fmt.Errorf("status %q: %w", out, err)
		}
		return nil
	})
	in.removeExamples()
	if err := scheduler.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	// the monitoring overlay, once the Prometheus Operator's CRDs (stand-ins here) are served: the API server
	// accepts it (a server-side dry run over the installed objects)
	prometheusCRDs := filepath.Join(in.root, "test", "e2e", "testdata", "prometheus-operator-crds.yaml")
	in.k("apply", "-f", prometheusCRDs)
	in.k("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	if out := in.k("apply", "-k", filepath.Join(manifests, "with-monitoring"), "--dry-run=server"); !strings.Contains(out, "servicemonitor.monitoring.coreos.com/stevedore") ||
		!strings.Contains(out, "prometheusrule.monitoring.coreos.com/stevedore-alerts") {
		t.Errorf("kubectl apply -k manifests/with-monitoring does not add the ServiceMonitor and the alert rules:\n%s", out)
	}
	in.k("delete", "-k", manifests, "--wait", "--timeout=2m")
	if out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "crd", "nodepools.stevedore.dev"); err == nil {
		t.Errorf("kubectl delete -k left the CRDs:\n%s", out)
	}
	in.k("delete", "-f", prometheusCRDs, "--wait")

	// kustomize into another namespace, with the component manifests/namespace (docs/upgrading.md): nothing is
	// left in stevedore, and the scheduler leads, launches and consolidates from autoscaling
	overlay := filepath.Join(in.root, "test", "e2e", "testdata", "namespace-overlay")
	in.k("apply", "-k", overlay)
	if out, err := run(t, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "get", "namespace", "stevedore"); err == nil {
		t.Errorf("the namespace component left the namespace stevedore:\n%s", out)
	}
	scheduler = in.runAsServiceAccount("autoscaling")
	in.applyExamples()
	in.k("scale", "deployment", "inflate", "--replicas", "1")
	eventually(t, "a node launched by the install in namespace autoscaling", in.claims(1))
	if holder := in.k("get", "lease", "stevedore-scheduler", "-n", "autoscaling", "-o", "jsonpath={.spec.holderIdentity}"); holder == "" {
		t.Error("the scheduler installed in autoscaling holds no lease there")
	}
	in.removeExamples()
	if err := scheduler.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	in.k("delete", "-k", overlay, "--wait", "--timeout=2m")

	in.checkNothingRefused()
}
