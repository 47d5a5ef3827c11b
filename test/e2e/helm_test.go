package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// helmBinary returns the helm the Makefile built ($HELM), or builds it from hack/helm.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "helm")
	cmd := exec.Command("go", "build", "-o", out, "helm.sh/helm/v3/cmd/helm")
	cmd.Dir = filepath.Join(repoRoot(t), "hack", "helm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building helm: %v\n%s", err, b)
	}
	return out
}

// objects reads a multi-document YAML stream into objects keyed kind/namespace/name.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split("\n"+stream, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		raw, err := yaml.YAMLToJSON([]byte(doc + "\n")) // the split took the line break that ends the document
		if err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := obj["kind"].(string) + "/" + str(meta["namespace"]) + "/" + str(meta["name"])
		if _, dup := out[key]; dup {
			t.Errorf("%s appears twice", key)
		}
		out[key] = obj
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestHelmChartRendersTheKustomizeManifests: `helm lint` passes and `helm template` with default values renders
// exactly the objects of `kubectl kustomize manifests/`, so both install paths install the same thing.
func TestHelmChartRendersTheKustomizeManifests(t *testing.T) {
	helm := helmBinary(t)
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	chart := filepath.Join(repoRoot(t), "charts", "stevedore")
	if out, err := run(t, nil, helm, "lint", "--strict", chart); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	rendered, err := run(t, nil, helm, "template", "stevedore", chart, "--namespace", "stevedore", "--include-crds")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rendered)
	}
	kustomized, err := run(t, nil, kubectl, "kustomize", filepath.Join(repoRoot(t), "manifests"))
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, kustomized)
	}
	fromHelm, fromKustomize := objects(t, rendered), objects(t, kustomized)
	var keys []string
	for k := range fromKustomize {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h, ok := fromHelm[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if !reflect.DeepEqual(h, fromKustomize[k]) {
			hj, _ := json.MarshalIndent(h, "", "  ")
			kj, _ := json.MarshalIndent(fromKustomize[k], "", "  ")
			t.Errorf("%s differs:\nhelm:\n%s\nkustomize:\n%s", k, hj, kj)
		}
	}
	for k := range fromHelm {
		if _, ok := fromKustomize[k]; !ok {
			t.Errorf("the chart renders %s, which manifests/ lacks", k)
		}
	}
	// values reach the objects
	custom, err := run(t, nil, helm, "template", "x", chart, "--namespace", "autoscaling", "--set", "clusterName=prod",
		"--set", "serviceAccount.roleArn=arn:aws:iam::111122223333:role/stevedore", "--set", "replicas=3", "--set", "monitoring.enabled=false")
	if err != nil {
		t.Fatalf("helm template with values: %v\n%s", err, custom)
	}
	for _, want := range []string{"value: \"prod\"", "arn:aws:iam::111122223333:role/stevedore", "replicas: 3", "resourceNamespace: autoscaling", "namespace: autoscaling"} {
		if !strings.Contains(custom, want) {
			t.Errorf("helm template with values lacks %q", want)
		}
	}
	if strings.Contains(custom, "kind: ServiceMonitor") {
		t.Error("monitoring.enabled=false still renders the ServiceMonitor")
	}
}
