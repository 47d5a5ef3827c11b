/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
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

// normalize makes a rendered object comparable between the two install paths: the configuration's file is
// compared as parsed YAML (the chart renders it from values, so its comments are gone), the ConfigMap's name
// without kustomize's content hash, and the Deployment without the chart's checksum annotation (the two ways each
// tool rolls the Deployment on a change) and without the cluster name a user must set.
func normalize(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(obj)
	text := hashedConfigMap.ReplaceAllString(string(raw), "stevedore-scheduler-config\"")
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	switch out["kind"] {
	case "ConfigMap":
		data := out["data"].(map[string]any)
		for k, v := range data {
			var parsed any
			if err := yaml.Unmarshal([]byte(v.(string)), &parsed); err != nil {
				t.Fatalf("ConfigMap %s: %v", k, err)
			}
			data[k] = parsed
		}
	case "Deployment":
		tmpl := out["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
		delete(tmpl, "annotations")
		for _, c := range out["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
			for _, e := range c.(map[string]any)["env"].([]any) {
				if env := e.(map[string]any); env["name"] == "STEVEDORE_CLUSTER_NAME" {
					env["value"] = "<cluster name>"
				}
			}
		}
	}
	return out
}

var hashedConfigMap = regexp.MustCompile(`stevedore-scheduler-config-[a-z0-9]{10}"`)

// TestHelmChartRendersTheKustomizeManifests: `helm lint` passes and `helm template` renders exactly the objects
// of `kubectl kustomize manifests/` (and, with monitoring on, of manifests/with-monitoring), so both install paths
// install the same thing; values a cluster must set are required, and monitoring needs the Prometheus Operator.
func TestHelmChartRendersTheKustomizeManifests(t *testing.T) {
	helm := helmBinary(t)
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	chart := filepath.Join(repoRoot(t), "charts", "stevedore")
	if out, err := run(t, nil, helm, "lint", "--strict", chart, "--set", "settings.clusterName=lint"); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	monitoringAPIs := []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}
	for _, tc := range []struct {
		dir   string
		flags []string
	}{
		{dir: "manifests", flags: []string{"--kube-version", "1.37.0"}},
		{dir: "manifests/with-monitoring", flags: append([]string{"--kube-version", "1.36.0", "--set", "monitoring.enabled=true"}, monitoringAPIs...)},
		// Kubernetes 1.34 and 1.35 serve no MutatingAdmissionPolicy: the chart picks the webhook by the cluster's version
		{dir: "manifests/with-admission-webhook", flags: []string{"--kube-version", "1.35.2"}},
		{dir: "manifests/with-admission-webhook", flags: []string{"--kube-version", "1.37.0", "--set", "schedulingPolicy.mode=Webhook"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			args := append([]string{"template", "stevedore", chart, "--namespace", "stevedore", "--include-crds",
				"--set", "settings.clusterName=my-cluster"}, tc.flags...)
			rendered, err := run(t, nil, helm, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, rendered)
			}
			kustomized, err := run(t, nil, kubectl, "kustomize", filepath.Join(repoRoot(t), tc.dir))
			if err != nil {
				t.Fatalf("kubectl kustomize: %v\n%s", err, kustomized)
			}
			fromHelm, fromKustomize := objects(t, rendered), objects(t, kustomized)
			// helm creates the release namespace itself (--create-namespace); kustomize ships it
			delete(fromKustomize, "Namespace//stevedore")
			var keys []string
			for k := range fromKustomize {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				name := hashedConfigMap.ReplaceAllString(k+"\"", "stevedore-scheduler-config\"")
				name = name[:len(name)-1]
				h, ok := fromHelm[name]
				if !ok {
					t.Errorf("the chart does not render %s", name)
					continue
				}
				if hn, kn := normalize(t, h), normalize(t, fromKustomize[k]); !reflect.DeepEqual(hn, kn) {
					hj, _ := json.MarshalIndent(hn, "", "  ")
					kj, _ := json.MarshalIndent(kn, "", "  ")
					t.Errorf("%s differs:\nhelm:\n%s\nkustomize:\n%s", name, hj, kj)
				}
			}
			if len(fromHelm) != len(fromKustomize) {
				t.Errorf("the chart renders %d objects, %s %d", len(fromHelm), tc.dir, len(fromKustomize))
			}
		})
	}

	// values reach the objects
	custom, err := run(t, nil, helm, "template", "x", chart, "--namespace", "autoscaling", "--set", "settings.clusterName=prod",
		"--set", "serviceAccount.roleArn=arn:aws:iam::111122223333:role/stevedore", "--set", "replicas=3",
		"--set", "settings.batchMaxDuration=20s", "--set", "settings.spotToSpotConsolidation=true",
		"--set", "extraArgs={--logging-format=json,--feature-gates=GenericWorkload=true}")
	if err != nil {
		t.Fatalf("helm template with values: %v\n%s", err, custom)
	}
	for _, want := range []string{"value: \"prod\"", "arn:aws:iam::111122223333:role/stevedore", "replicas: 3", "name: STEVEDORE_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}",
		"namespace: autoscaling", "batchMaxDuration: 20s", "spotToSpotConsolidation: true", "batchIdleDuration: 1s",
		"- -v=2\n            - \"--logging-format=json\"\n            - \"--feature-gates=GenericWorkload=true\""} {
		if !strings.Contains(custom, want) {
			t.Errorf("helm template with values lacks %q", want)
		}
	}
	if strings.Contains(custom, "kind: ServiceMonitor") || strings.Contains(custom, "kind: Namespace") {
		t.Error("the default values render a ServiceMonitor or a Namespace")
	}
	checksum := func(out string) string {
		i := strings.Index(out, "checksum/config: ")
		if i < 0 {
			t.Fatalf("no checksum/config annotation in:\n%s", out)
		}
		return strings.Fields(out[i:])[1]
	}
	other, err := run(t, nil, helm, "template", "x", chart, "--namespace", "autoscaling", "--set", "settings.clusterName=prod",
		"--set", "serviceAccount.roleArn=arn:aws:iam::111122223333:role/stevedore", "--set", "replicas=3",
		"--set", "settings.batchMaxDuration=30s", "--set", "settings.spotToSpotConsolidation=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, other)
	}
	if checksum(custom) == checksum(other) {
		t.Error("a change of settings.batchMaxDuration leaves the Deployment's checksum/config annotation as it was: the Deployment would not roll")
	}

	// what a user must set, and what a cluster must serve, fail the install with a message saying so
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no cluster name", args: nil, want: "settings.clusterName is required"},
		{name: "monitoring without the Prometheus Operator", args: []string{"--set", "settings.clusterName=prod", "--set", "monitoring.enabled=true"},
			want: "needs the Prometheus Operator's CRDs"},
	} {
		out, err := run(t, nil, helm, append([]string{"template", "x", chart, "--namespace", "stevedore"}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: helm template succeeded or said something else (want %q): %v\n%s", tc.name, tc.want, err, lastLines(out, 5))
		}
	}
}

// TestEveryChartValueReachesItsObject renders the chart with every value changed from its default
// (testdata/chart-values.yaml) and finds each in the object it configures; the values schema refuses unknown keys
// naming them, and Karpenter settings with no equivalent stop the install saying what to do instead.
func TestEveryChartValueReachesItsObject(t *testing.T) {
	helm := helmBinary(t)
	chart := filepath.Join(repoRoot(t), "charts", "stevedore")
	values := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "chart-values.yaml")
	monitoringAPIs := []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}
	out, err := run(t, nil, helm, append([]string{"template", "x", chart, "-n", "autoscaling", "-f", values, "--set", "monitoring.enabled=true"}, monitoringAPIs...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs := objects(t, out)
	get := func(key string) map[string]any {
		t.Helper()
		o, ok := objs[key]
		if !ok {
			t.Fatalf("no %s rendered", key)
		}
		return o
	}
	asJSON := func(v any) string {
		raw, _ := json.Marshal(v)
		return string(raw)
	}
	deployment := asJSON(get("Deployment/autoscaling/stevedore"))
	for _, tc := range []struct{ value, in, want string }{
		{"settings.batchMaxDuration", "ConfigMap", "batchMaxDuration: 12s"},
		{"settings.solveTimeout", "ConfigMap", "solveTimeout: 3s"},
		{"settings.nodeRepair", "ConfigMap", "enabled: false"},
		{"settings.rebalanceAction", "ConfigMap", "rebalanceAction: Event"},
		{"image", "Deployment", `"image":"registry.example.com/stevedore/scheduler:v9.9.9"`},
		{"imagePullPolicy", "Deployment", `"imagePullPolicy":"Always"`},
		{"imagePullSecrets", "Deployment", `"imagePullSecrets":[{"name":"registry-credentials"}]`},
		{"logLevel", "Deployment", `"-v=4"`},
		{"serviceAccount.name", "Deployment", `"serviceAccountName":"autoscaler"`},
		{"podLabels", "Deployment", `"team":"platform"`},
		{"podAnnotations", "Deployment", `"example.com/scrape":"false"`},
		{"priorityClassName", "Deployment", `"priorityClassName":"system-node-critical"`},
		{"nodeSelector", "Deployment", `"nodeSelector":{"kubernetes.io/os":"linux"}`},
		{"tolerations", "Deployment", `"key":"dedicated","operator":"Equal","value":"autoscaling"`},
		{"affinity (the replicas' selector filled in)", "Deployment", `"podAffinityTerm":{"labelSelector":{"matchLabels":{"app.kubernetes.io/name":"stevedore"}},"topologyKey":"topology.kubernetes.io/zone"}`},
		{"topologySpreadConstraints (the replicas' selector filled in)", "Deployment", `{"labelSelector":{"matchLabels":{"app.kubernetes.io/name":"stevedore"}},"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}`},
		{"env", "Deployment", `{"name":"HTTPS_PROXY","value":"http://proxy.example.com:3128"}`},
		{"envFrom", "Deployment", `"envFrom":[{"configMapRef":{"name":"stevedore-extra-env","optional":true}}]`},
		{"revisionHistoryLimit", "Deployment", `"revisionHistoryLimit":3`},
		{"strategy", "Deployment", `"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}`},
		{"resources", "Deployment", `"requests":{"cpu":"500m","memory":"768Mi"}`},
	} {
		haystack := deployment
		if tc.in == "ConfigMap" {
			haystack = get("ConfigMap/autoscaling/stevedore-scheduler-config")["data"].(map[string]any)["scheduler-config.yaml"].(string)
		}
		if !strings.Contains(haystack, tc.want) {
			t.Errorf("%s does not reach the %s: %s lacks %s", tc.value, tc.in, tc.in, tc.want)
		}
	}
	if sa := asJSON(get("ServiceAccount/autoscaling/autoscaler")); !strings.Contains(sa, `"example.com/owner":"platform"`) || !strings.Contains(sa, "role/stevedore") {
		t.Errorf("serviceAccount.annotations and roleArn do not reach the ServiceAccount: %s", sa)
	}
	for _, binding := range []string{"ClusterRoleBinding//stevedore", "ClusterRoleBinding//stevedore-kube-scheduler", "RoleBinding/autoscaling/stevedore-leader-election"} {
		if b := asJSON(get(binding)); !strings.Contains(b, `"name":"autoscaler","namespace":"autoscaling"`) {
			t.Errorf("%s is not bound to serviceAccount.name: %s", binding, b)
		}
	}
	if role := asJSON(get("ClusterRole//stevedore")); !strings.Contains(role, `"resources":["widgets"]`) {
		t.Errorf("additionalClusterRoleRules do not reach the ClusterRole: %s", role)
	}
	// what EC2 launches (NodePools, EC2NodeClasses, NodeOverlays) is admin's to change, not edit's
	for _, key := range []string{"ClusterRole//stevedore-view", "ClusterRole//stevedore-edit", "ClusterRole//stevedore-admin"} {
		role := get(key)
		labels, _ := role["metadata"].(map[string]any)["labels"].(map[string]any)
		writes := writesLaunchers(role)
		switch {
		case labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" && writes:
			t.Errorf("%s aggregates into edit and changes what EC2 launches: %s", key, asJSON(role))
		case key == "ClusterRole//stevedore-admin" && (!writes || labels["rbac.authorization.k8s.io/aggregate-to-admin"] != "true"):
			t.Errorf("%s does not give admin the changes to NodePools, EC2NodeClasses and NodeOverlays: %s", key, asJSON(role))
		}
	}
	if pdb := asJSON(get("PodDisruptionBudget/autoscaling/stevedore-pdb")); !strings.Contains(pdb, `"maxUnavailable":1`) || strings.Contains(pdb, "minAvailable") {
		t.Errorf("podDisruptionBudget does not reach the PodDisruptionBudget: %s", pdb)
	}
	if sm := asJSON(get("ServiceMonitor/autoscaling/stevedore")); !strings.Contains(sm, `"interval":"15s"`) || !strings.Contains(sm, `"targetLabel":"node"`) ||
		!strings.Contains(sm, `"labels":{"release":"prometheus"}`) {
		t.Errorf("monitoring.endpointConfig or labels do not reach the ServiceMonitor: %s", sm)
	}
	get("MutatingAdmissionPolicy//stevedore-scheduling")

	// values that turn objects off
	out, err = run(t, nil, helm, "template", "x", chart, "-n", "stevedore", "--set", "settings.clusterName=x", "--set", "serviceAccount.create=false",
		"--set", "podDisruptionBudget.enabled=false", "--set", "rbac.aggregateToViewEdit=false")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	off := objects(t, out)
	if _, ok := off["Deployment/stevedore/stevedore"]; !ok {
		t.Fatalf("no Deployment rendered:\n%s", out)
	}
	// surge off: no write on Deployments or ReplicaSets
	noSurge, err := run(t, nil, helm, "template", "x", chart, "-n", "stevedore", "--set", "settings.clusterName=x", "--set", "settings.surge=false")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, noSurge)
	}
	if role := asJSON(objects(t, noSurge)["ClusterRole//stevedore"]); strings.Contains(role, "deployments/scale") || strings.Contains(role, `"verbs":["patch"]`) ||
		!strings.Contains(role, "pods/eviction") || !strings.Contains(noSurge, "surge: false") {
		t.Errorf("settings.surge=false does not reach the configuration or leaves the Deployment writes in the ClusterRole: %s", role)
	}
	if role := asJSON(get("ClusterRole//stevedore")); !strings.Contains(role, "deployments/scale") {
		t.Errorf("the default ClusterRole lacks the surge's Deployment writes: %s", role)
	}
	for _, key := range []string{"ServiceAccount/stevedore/stevedore", "PodDisruptionBudget/stevedore/stevedore", "ClusterRole//stevedore-view", "ClusterRole//stevedore-edit",
		"ClusterRole//stevedore-admin"} {
		if _, ok := off[key]; ok {
			t.Errorf("%s rendered though its value turns it off", key)
		}
	}

	// what the values schema and the chart refuse, and the message naming the key
	for _, tc := range []struct {
		set, want string
	}{
		{"settings.isolatedVPC=true", "settings.isolatedVPC is a Karpenter setting with no Stevedore equivalent"},
		{"settings.featureGates.nodeRepair=true", "settings.featureGates is a Karpenter setting with no Stevedore equivalent: Stevedore has no feature gates"},
		{"settings.reservedENIs=1", "settings.reservedENIs is a Karpenter setting"},
		{"settings.batchMaxDurations=10s", "additional properties 'batchMaxDurations' not allowed"},
		{"settings.batchMaxDuration=soon", "/settings/batchMaxDuration"},
		{"controller.env[0].name=X", "additional properties 'controller' not allowed"},
		{"logLevel=verbose", "/logLevel"},
		{"schedulingPolicy.mode=Always", "/schedulingPolicy/mode"},
	} {
		out, err := run(t, nil, helm, "template", "x", chart, "--set", "settings.clusterName=x", "--set", tc.set)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: helm template succeeded or said something else (want %q): %v\n%s", tc.set, tc.want, err, lastLines(out, 5))
		}
	}
}

// TestTheCRDChartRendersTheCRDs: `helm lint` passes on charts/stevedore-crd and it renders exactly the CRDs of
// manifests/crds, each kept on uninstall (helm.sh/resource-policy: keep).
func TestTheCRDChartRendersTheCRDs(t *testing.T) {
	helm := helmBinary(t)
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	chart := filepath.Join(repoRoot(t), "charts", "stevedore-crd")
	if out, err := run(t, nil, helm, "lint", "--strict", chart); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	rendered, err := run(t, nil, helm, "template", "stevedore-crd", chart)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rendered)
	}
	kustomized, err := run(t, nil, kubectl, "kustomize", filepath.Join(repoRoot(t), "manifests", "crds"))
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, kustomized)
	}
	fromHelm, fromKustomize := objects(t, rendered), objects(t, kustomized)
	for key := range fromKustomize {
		// the coscheduling PodGroup CRD is also Kubeflow's and scheduler-plugins', the ProvisioningRequest CRD Cluster
		// Autoscaler's: the CRD chart leaves them out, so that helm upgrade never fights their installation of them
		// (the main chart's crds/ carries them)
		if strings.HasSuffix(key, ".scheduling.x-k8s.io") || strings.HasSuffix(key, ".autoscaling.x-k8s.io") {
			delete(fromKustomize, key)
		}
	}
	if len(fromHelm) != len(fromKustomize) {
		t.Errorf("the CRD chart renders %d objects, manifests/crds %d", len(fromHelm), len(fromKustomize))
	}
	for key, crd := range fromKustomize {
		h, ok := fromHelm[key]
		if !ok {
			t.Errorf("the CRD chart lacks %s", key)
			continue
		}
		annotations := h["metadata"].(map[string]any)["annotations"].(map[string]any)
		if annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s is not kept on uninstall: %v", key, annotations)
		}
		delete(annotations, "helm.sh/resource-policy")
		if !reflect.DeepEqual(h, crd) {
			t.Errorf("%s differs between the CRD chart and manifests/crds", key)
		}
	}
}

// writesLaunchers reports whether a rendered ClusterRole lets its holder create, change or delete NodePools,
// EC2NodeClasses, NodeOverlays or Commitments (what decides what EC2 launches).
func writesLaunchers(role map[string]any) bool {
	rules, _ := role["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		resources, _ := rule["resources"].([]any)
		verbs, _ := rule["verbs"].([]any)
		launches, writes := false, false
		for _, res := range resources {
			launches = launches || res == "nodepools" || res == "ec2nodeclasses" || res == "nodeoverlays" || res == "commitments"
		}
		for _, v := range verbs {
			writes = writes || v == "create" || v == "update" || v == "patch" || v == "delete"
		}
		if launches && writes {
			return true
		}
	}
	return false
}
