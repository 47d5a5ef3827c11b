/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/certs"
	"github.com/stevedore-dev/stevedore/pkg/provreq"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// kueueMetricsCerts is where Kueue's manager reads its metrics serving certificate when it does not manage its
// certificates itself; the path is fixed in its main.
const kueueMetricsCerts = "/etc/kueue/metrics/certs"

// TestAKueueJobWaitsForItsProvisioningRequestAndRunsOnTheBookedNodes runs Kueue's own controller manager against
// the sandbox with a ClusterQueue whose admission check is a ProvisioningRequest of class
// best-effort-atomic-scale-up: a Job of three 3-CPU pods stays suspended while its request cannot be met (a
// NodePool limit allows two of the three nodes), is admitted once the three nodes are up and the request
// Provisioned, and its pods, which Kueue marks as consuming the request, bind on those nodes.
func TestAKueueJobWaitsForItsProvisioningRequestAndRunsOnTheBookedNodes(t *testing.T) {
	ctx := harness.Context(t)
	kueue := kueueBinaries(t)
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "kueue", "kueue", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
		})
	running := startKueue(t, kueue)

	dyn := kueueQueue(t, running, ns, "kueue", map[string]string{"cpu": "64", "memory": "256Gi"})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		workloads := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
		if list, err := dyn.Resource(workloads).Namespace(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
			for _, w := range list.Items {
				status, _ := yaml.Marshal(w.Object["status"])
				t.Logf("Workload %s status:\n%s", w.GetName(), status)
			}
		}
	})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "jobs"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3), Completions: ptr.To[int32](3), Suspend: ptr.To(true), // as Kueue's webhook would set it
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SchedulerName: harness.Pod(ns, "x", "1", "1Gi").Spec.SchedulerName,
					Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"),
							corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	if _, err := sb.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Kueue reserves quota and asks for the capacity; two of the three nodes is no capacity
	name := waitKueueRequest(t, ns)
	waitCondition(t, ns, name, autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if j, err := sb.Kube.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{}); err != nil || !ptr.Deref(j.Spec.Suspend, false) {
		t.Fatalf("Job %+v (%v), want it suspended while its ProvisioningRequest is not Provisioned", j, err)
	}
	if claims := harness.NodeClaimsOf(t, sb, "kueue"); len(claims) > 0 {
		t.Fatalf("%d NodeClaims launched for a request that cannot be met whole, want none", len(claims))
	}

	np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, "kueue", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, name, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	booked := map[string]bool{}
	for _, c := range harness.NodeClaimsOf(t, sb, "kueue") {
		booked[c.Status.NodeName] = true
	}
	if len(booked) != 3 {
		t.Fatalf("nodes %v launched for the request, want 3", booked)
	}

	// admitted: Kueue unsuspends the Job, and its pods consume the request on the booked nodes
	var pods []corev1.Pod
	harness.Eventually(t, "the Job's 3 pods bound", func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=train"})
		if err != nil {
			return false, err
		}
		pods = list.Items
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 3, nil
	})
	for _, p := range pods {
		if got := p.Annotations[autoscalingv1.AnnotationConsume]; got != name {
			t.Errorf("pod %s consumes %q, want %q", p.Name, got, name)
		}
		if !booked[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, not a node launched for the request", p.Name, p.Spec.NodeName)
		}
	}
	waitCondition(t, ns, name, autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonBookingConsumed)
}

// TestTheWorkedTrainingJobOfTheMLPageRunsFromKueueAdmissionToItsPodsRunning follows docs/ml.md's worked example
// with Kueue's own manager: a Job of sixteen workers, each asking for eight GPUs and four EFA interfaces, queued
// behind a ProvisioningRequest admission check, stays suspended until Stevedore has launched sixteen p4d.24xlarge
// in one all-or-nothing fleet, into one cluster placement group of the request's own and each with its four EFA
// interfaces; then Kueue admits it and its sixteen pods bind on those nodes.
func TestTheWorkedTrainingJobOfTheMLPageRunsFromKueueAdmissionToItsPodsRunning(t *testing.T) {
	const workers = 16
	ctx := harness.Context(t)
	kueue := kueueBinaries(t)
	ns := harness.Namespace(t, sb)
	nc := harness.NewNodeClass()
	nc.Name, nc.Spec.GangPlacementGroup = "kueue-training", stevedorev1.GangPlacementGroupCluster
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), nc.Name, metav1.DeleteOptions{})
	})
	harness.NodePool(t, sb, "kueue-training", "kueue-training", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "p4d.24xlarge"), harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef.Name = nc.Name
			np.Spec.Limits = stevedorev1.Limits{stevedorev1.ResourceNVIDIAGPU: resource.MustParse("128")}
		})
	running := startKueue(t, kueue)
	kueueQueue(t, running, ns, "kueue-training", map[string]string{"cpu": "1536", "memory": "18Ti",
		string(stevedorev1.ResourceNVIDIAGPU): "128", string(stevedorev1.ResourceEFA): "64"})
	devices := corev1.ResourceList{stevedorev1.ResourceNVIDIAGPU: resource.MustParse("8"), stevedorev1.ResourceEFA: resource.MustParse("4")}
	requests := devices.DeepCopy()
	requests[corev1.ResourceCPU], requests[corev1.ResourceMemory] = resource.MustParse("90"), resource.MustParse("1000Gi")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "jobs"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](workers), Completions: ptr.To[int32](workers), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Suspend: ptr.To(true), // as Kueue's webhook would set it
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SchedulerName: harness.Pod(ns, "x", "1", "1Gi").Spec.SchedulerName,
					Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: requests, Limits: devices}}}}}}}
	if _, err := sb.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := waitKueueRequest(t, ns)
	waitCondition(t, ns, name, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)

	// the request's nodes: sixteen p4d.24xlarge, each with its four EFA interfaces, in one cluster group of its own
	booked, groups, zones := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range harness.NodeClaimsOf(t, sb, "kueue-training") {
		inst := sb.AWS.EC2.InstanceByNodeName(c.Status.NodeName)
		if inst == nil {
			t.Fatalf("no instance for NodeClaim %s (node %q)", c.Name, c.Status.NodeName)
		}
		booked[c.Status.NodeName] = true
		groups[inst.PlacementGroup], zones[inst.Zone] = true, true
		efa := efaInterfacesOf(inst)
		if inst.Type != "p4d.24xlarge" || efa != 4 {
			t.Errorf("instance %s is a %s with %d EFA interfaces, want a p4d.24xlarge with 4", inst.ID, inst.Type, efa)
		}
	}
	if len(booked) != workers || len(zones) != 1 || len(groups) != 1 || groups[""] {
		t.Fatalf("the request got %d nodes in zones %v and placement groups %v; want %d in one zone and one placement group",
			len(booked), zones, groups, workers)
	}
	for group := range groups {
		g := sb.AWS.EC2.PlacementGroups()[group]
		if g.Strategy != "cluster" || g.Tags["stevedore.dev/gang"] != ns+"/"+name {
			t.Errorf("placement group %s: strategy %q, tags %v; want a cluster group tagged with the request %s/%s", group, g.Strategy, g.Tags, ns, name)
		}
	}

	// admitted: the Job's sixteen pods bind on the booked nodes (the sandbox's kubelet completes a Job's pods, so a
	// pod may take the node of one already finished)
	nodes := map[string]bool{}
	harness.Eventually(t, "the Job's 16 pods bound", func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=train"})
		if err != nil {
			return false, err
		}
		clear(nodes)
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			nodes[p.Spec.NodeName] = true
			if !booked[p.Spec.NodeName] {
				return false, fmt.Errorf("pod %s bound to %s, not a node launched for the request", p.Name, p.Spec.NodeName)
			}
		}
		return len(list.Items) == workers && bound == workers, nil
	})
	t.Logf("%d workers ran on %d of the %d p4d.24xlarge launched in zone %v, placement group %v", workers, len(nodes), len(booked), zones, groups)
}

// kueueQueue sets up, in Kueue, a LocalQueue "jobs" in ns whose ClusterQueue covers the resources with the quotas given,
// on a flavor that puts the pods on the NodePools of the isolation, behind an admission check by ProvisioningRequests of
// class best-effort-atomic-scale-up; it waits until the check is Active, and returns a dynamic client.
func kueueQueue(t *testing.T, running func() error, ns, isolation string, quotas map[string]string) dynamic.Interface {
	t.Helper()
	ctx := harness.Context(t)
	dyn, err := dynamic.NewForConfig(sb.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	var covered, nominal []string
	for _, name := range slices.Sorted(maps.Keys(quotas)) {
		covered = append(covered, name)
		nominal = append(nominal, fmt.Sprintf("      - {name: %s, nominalQuota: %s}", name, quotas[name]))
	}
	// the flavor puts the Job's pods (and the request's template) on the test's NodePool
	for _, obj := range []string{`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: NS-flavor}
spec:
  nodeLabels: {` + harness.IsolationKey + `: ISOLATION}
  tolerations: [{key: ` + harness.IsolationKey + `, operator: Equal, value: ISOLATION, effect: NoSchedule}]`, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: NS-config}
spec:
  provisioningClassName: ` + autoscalingv1.ClassBestEffortAtomicScaleUp, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: NS-check}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: NS-config}`, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: NS-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [` + strings.Join(covered, ", ") + `]
    flavors:
    - name: NS-flavor
      resources:
` + strings.Join(nominal, "\n") + `
  admissionChecksStrategy:
    admissionChecks: [{name: NS-check}]`, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: jobs, namespace: NS}
spec: {clusterQueue: NS-queue}`} {
		createUnstructured(ctx, t, dyn, strings.ReplaceAll(strings.ReplaceAll(obj, "ISOLATION", isolation), "NS", ns))
	}
	// Kueue's ProvisioningRequest admission check controller runs, and found the API, once the check is Active
	checks := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
	harness.Eventually(t, "AdmissionCheck "+ns+"-check Active", func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		check, err := dyn.Resource(checks).Get(ctx, ns+"-check", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(check.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Active" {
				return c["status"] == "True", nil
			}
		}
		return false, nil
	})
	return dyn
}

// waitKueueRequest waits for the ProvisioningRequest Kueue creates in ns and returns its name.
func waitKueueRequest(t *testing.T, ns string) string {
	t.Helper()
	var name string
	harness.Eventually(t, "Kueue to create a ProvisioningRequest", func(ctx context.Context) (bool, error) {
		list, err := sb.Stevedore.AutoscalingXV1().ProvisioningRequests(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		name = list.Items[0].Name
		return true, nil
	})
	return name
}

// kueueBin is Kueue's manager binary and the directory of its CRDs.
type kueueBin struct{ manager, crds string }

// kueueBinaries returns Kueue's manager and CRDs: STEVEDORE_KUEUE_BIN and STEVEDORE_KUEUE_CRDS (make test builds
// them from hack/kueue), else built here. Kueue reads its metrics certificate from a fixed system path: where it
// cannot be written the test is skipped, unless STEVEDORE_REQUIRE_KUEUE says it must run.
func kueueBinaries(t *testing.T) kueueBin {
	t.Helper()
	if err := metricsCerts(); err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_KUEUE") != "" {
			t.Fatalf("Kueue's manager needs a certificate in %s: %v", kueueMetricsCerts, err)
		}
		t.Skipf("Kueue's manager needs a certificate in %s, which cannot be written here: %v", kueueMetricsCerts, err)
	}
	if bin, crds := os.Getenv("STEVEDORE_KUEUE_BIN"), os.Getenv("STEVEDORE_KUEUE_CRDS"); bin != "" && crds != "" {
		return kueueBin{manager: bin, crds: crds}
	}
	root, err := filepath.Abs("../../../hack/kueue")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "kueue")
	build := exec.Command("go", "build", "-o", out, "sigs.k8s.io/kueue/cmd/kueue")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building Kueue: %v\n%s", err, b)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	list.Dir = root
	dir, err := list.Output()
	if err != nil {
		t.Fatalf("finding Kueue's module: %v", err)
	}
	return kueueBin{manager: out, crds: filepath.Join(strings.TrimSpace(string(dir)), "config", "components", "crd", "bases")}
}

// metricsCerts writes a self-signed certificate where Kueue's manager reads its metrics certificate, unless one
// is there.
func metricsCerts() error {
	if _, err := os.Stat(filepath.Join(kueueMetricsCerts, "tls.key")); err == nil {
		return nil
	}
	return writeServingCert(kueueMetricsCerts)
}

// writeServingCert writes tls.crt and tls.key for localhost into dir.
func writeServingCert(dir string) error {
	now := time.Now()
	ca, err := certs.NewCA("kueue-test", now, 24*time.Hour)
	if err != nil {
		return err
	}
	pair, err := certs.Sign(ca, certs.Leaf{Subject: pkix.Name{CommonName: "localhost"}, Usage: x509.ExtKeyUsageServerAuth,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Names: []string{"localhost"}}, now, 24*time.Hour)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pair.Cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pair.Key, 0o600)
}

// startKueue installs Kueue's CRDs and runs its manager against the sandbox until the test ends: its own
// webhook certificate (the API server never calls it: the test creates its Job suspended, as the webhook would),
// no leader election, no metrics or health listeners, no visibility server, Jobs only. The function returned
// says, with its log's end, if the manager has exited.
func startKueue(t *testing.T, kueue kueueBin) (running func() error) {
	t.Helper()
	ctx := harness.Context(t)
	files, err := filepath.Glob(filepath.Join(kueue.crds, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("Kueue's CRDs in %s: %v (%d files)", kueue.crds, err, len(files))
	}
	docs := map[string][]byte{}
	for _, f := range files {
		if docs[filepath.Base(f)], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := sandbox.InstallCRDs(ctx, sb.RESTConfig, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}},
		metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	dir := t.TempDir()
	webhookCerts := filepath.Join(dir, "webhook")
	if err := writeServingCert(webhookCerts); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "kueue.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "0"}
metrics: {bindAddress: "0"}
webhook: {port: 0, certDir: `+webhookCerts+`}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
integrations: {frameworks: [batch/job]}
featureGates: {VisibilityOnDemand: false}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "kueue.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kueue.manager, "--config", config, "--kubeconfig", sb.Kubeconfig())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		exit := <-exited
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("Kueue's manager (%v) log:\n%s", exit, tail(string(b), 60))
			}
		}
	})
	return func() error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("kueue's manager exited (%w):\n%s", err, tail(string(b), 40))
		default:
			return nil
		}
	}
}

// createUnstructured creates the object a YAML document describes.
func createUnstructured(ctx context.Context, t *testing.T, dyn dynamic.Interface, doc string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	gvk := obj.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
	var err error
	if ns := obj.GetNamespace(); ns != "" {
		_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	} else {
		_, err = dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("creating %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
