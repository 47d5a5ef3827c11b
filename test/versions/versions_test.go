/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package versions

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// Environment of the matrix: where the other minors' binaries are (make kube-binaries), and "full" to run every
// check rather than the smoke ones.
const (
	envBinaries = "STEVEDORE_KUBE_BINARIES"
	envMatrix   = "STEVEDORE_VERSION_MATRIX"
)

// spotNotice is shorter than AWS's two minutes to keep the interruption check short; the scheduler is told the same.
const spotNotice = 40 * time.Second

// check is one thing the matrix asserts on a minor.
type check struct {
	Name string
	// Smoke checks run in `make test`; the others with `make test-versions` only.
	Smoke bool
	// Only, when set, says which minors the check applies to; OwnSandbox checks need a sandbox configured for them.
	Only       func(minor) bool
	OwnSandbox bool
	Run        func(t *testing.T, sb *sandbox.Sandbox, m minor)
	Says       string
}

// binaries returns the folder of a minor's control-plane binaries ("" for the in-process one), skipping the test
// when $STEVEDORE_KUBE_BINARIES is not set (make test sets it; go test by hand may not have built them).
func binaries(t *testing.T, m minor) string {
	t.Helper()
	if !m.External {
		return ""
	}
	root := os.Getenv(envBinaries)
	if root == "" {
		t.Skipf("Kubernetes %s runs from its own binaries: make kube-binaries, and set %s=<repo>/bin/kube", m.Version, envBinaries)
	}
	dir := filepath.Join(root, m.Version)
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		t.Fatalf("%s is set but Kubernetes %s's binaries are missing (make kube-binaries): %v", envBinaries, m.Version, err)
	}
	return dir
}

// resetGates puts the process's feature gates the scheduler fits to its API server back to their defaults: a
// sandbox of an older minor turned some off in this process.
func resetGates(t *testing.T) {
	t.Helper()
	fg := utilfeature.DefaultMutableFeatureGate
	specs := fg.GetAll()
	set := map[string]bool{}
	for _, f := range []featuregate.Feature{features.DRADeviceTaintRules, features.GenericWorkload} {
		set[string(f)] = specs[f].Default
	}
	if err := fg.SetFromMap(set); err != nil {
		t.Fatal(err)
	}
}

// start runs a sandbox on a minor's control plane with Stevedore in the test process, with the feature gates of
// this process (which the scheduler reads, and the in-process API server starts from) at their defaults but gates.
func start(t *testing.T, m minor, gates map[string]bool, apiServerArgs ...string) *sandbox.Sandbox {
	t.Helper()
	return startWith(t, m, gates, nil, apiServerArgs...)
}

// startWith is start with more plugin arguments.
func startWith(t *testing.T, m minor, gates map[string]bool, pluginArgs map[string]any, apiServerArgs ...string) *sandbox.Sandbox {
	t.Helper()
	dir := binaries(t, m)
	resetGates(t)
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resetGates(t) })
	args := map[string]any{"disruptionPollInterval": "1s", "disruptionValidationDelay": "1s"}
	maps.Copy(args, pluginArgs)
	sb, err := sandbox.Start(context.Background(), sandbox.Options{WithScheduler: true, KubeBinaries: dir, APIServerArgs: apiServerArgs,
		LaunchDelay: 500 * time.Millisecond, SpotNotice: spotNotice, PluginArgs: args})
	if err != nil {
		t.Fatalf("a sandbox on Kubernetes %s: %v", m.Version, err)
	}
	t.Cleanup(sb.Stop)
	got, err := sb.KubernetesVersion()
	if err != nil {
		t.Fatal(err)
	}
	if minor := got.Major + "." + got.Minor; minor != m.Version || (m.External && got.GitVersion != m.Patch) {
		t.Fatalf("the API server is %s (%s), want %s", minor, got.GitVersion, m.Patch)
	}
	return sb
}

// TestStevedoreRunsOnEverySupportedMinor runs the checks on a sandbox of each minor of the matrix.
func TestStevedoreRunsOnEverySupportedMinor(t *testing.T) {
	full := os.Getenv(envMatrix) == "full"
	for _, m := range matrix() {
		t.Run(m.Version, func(t *testing.T) {
			var run []check
			for _, c := range checks() {
				if (c.Smoke || full) && (c.Only == nil || c.Only(m)) && !c.OwnSandbox {
					run = append(run, c)
				}
			}
			sb := start(t, m, nil)
			for _, c := range run {
				t.Run(c.Name, func(t *testing.T) { c.Run(t, sb, m) })
			}
		})
	}
}

// TestGangsWaitOnEveryMinorThatServesTheWorkloadAPI runs the gang check on a sandbox of each minor that can serve
// the Workload API, turned on in its API server and in the scheduler.
func TestGangsWaitOnEveryMinorThatServesTheWorkloadAPI(t *testing.T) {
	for _, m := range matrix() {
		if !m.Gangs {
			continue
		}
		t.Run(m.Version, func(t *testing.T) {
			sb := start(t, m, map[string]bool{string(features.GenericWorkload): true},
				"--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true")
			checkGangs(t, sb, m)
		})
	}
}

// TestPodCreationGoesOnWhileStevedoreIsDown runs the down check on a sandbox of each minor.
func TestPodCreationGoesOnWhileStevedoreIsDown(t *testing.T) {
	for _, m := range matrix() {
		t.Run(m.Version, func(t *testing.T) { checkDown(t, start(t, m, nil), m) })
	}
}

// TestTheDocsListTheMatrix: docs/compatibility.md holds the table the matrix gives.
func TestTheDocsListTheMatrix(t *testing.T) {
	raw, err := os.ReadFile("../../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := docsTable(); !strings.Contains(string(raw), want) {
		t.Errorf("docs/compatibility.md does not list the matrix as it runs; its table should read:\n\n%s", want)
	}
}

// noConsolidation keeps a check's nodes until it removes them.
func noConsolidation(np *stevedorev1.NodePool) {
	np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
}

func checkProvisioning(t *testing.T, sb *sandbox.Sandbox, m minor) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "provisioning", "provisioning", noConsolidation)
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "web", 3, "500m", "512Mi"), "provisioning")
	for _, p := range harness.WaitRunning(t, sb, ns, "web", 3) {
		if node := harness.Node(t, sb, p.Spec.NodeName); node.Labels[stevedorev1.LabelNodePool] != "provisioning" {
			t.Errorf("pod %s runs on %s, not on a node Stevedore launched", p.Name, node.Name)
		}
	}
	for _, c := range harness.NodeClaimsOf(t, sb, "provisioning") {
		if name := sb.AWS.EC2.ImageName(c.Status.ImageID); !strings.Contains(name, "-"+m.Version+"-") {
			t.Errorf("NodeClaim %s launched image %s (%q), not one of Kubernetes %s", c.Name, c.Status.ImageID, name, m.Version)
		}
	}
}

func checkAdmission(t *testing.T, sb *sandbox.Sandbox, m minor) {
	if got := sb.AdmissionMode(); got != m.Admission {
		t.Errorf("admission by %s, want %s", got, m.Admission)
	}
	harness.CheckAdmission(t, sb)
	harness.CheckAdmissionAfterAWebhook(t, sb)
}

func checkFeatures(t *testing.T, _ *sandbox.Sandbox, m minor) {
	for _, f := range []featuregate.Feature{features.DRADeviceTaintRules} {
		on := utilfeature.DefaultFeatureGate.Enabled(f)
		if want := !slices.Contains(m.TurnedOff, string(f)); on != want {
			t.Errorf("feature %s on: %v, want %v", f, on, want)
		}
	}
}

func checkConsolidation(t *testing.T, sb *sandbox.Sandbox, _ minor) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "consolidation", "consolidation")
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "web", 6, "1", "1Gi"), "consolidation")
	harness.WaitRunning(t, sb, ns, "web", 6)
	before := len(harness.LiveNodeClaimsOf(t, sb, "consolidation"))
	if before < 2 {
		t.Fatalf("%d nodes for 6 pods of 1 CPU: the check needs at least 2", before)
	}
	harness.Scale(t, sb, ns, "web", 1)
	harness.EventuallyWithin(t, 4*time.Minute, "the NodePool to consolidate down to one node", func(context.Context) (bool, error) {
		return len(harness.LiveNodeClaimsOf(t, sb, "consolidation")) == 1, nil
	})
	harness.WaitRunning(t, sb, ns, "web", 1)
}

func checkInterruption(t *testing.T, sb *sandbox.Sandbox, _ minor) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "spot", "spot", noConsolidation, harness.WithRequirements(
		harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeSpot)))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 2, "500m", "512Mi"), "spot")
	pods := harness.WaitRunning(t, sb, ns, "app", 2)
	node := pods[0].Spec.NodeName
	if _, err := sb.Interrupt(node, awsemu.NoticeSpot); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 4*time.Minute, "every pod of app Running off the interrupted node "+node, func(ctx context.Context) (bool, error) {
		running, err := harness.RunningPods(ctx, sb, ns, "app")
		if err != nil || len(running) != 2 {
			return false, err
		}
		for _, p := range running {
			if p.Spec.NodeName == node {
				return false, nil
			}
		}
		return true, nil
	})
}

// checkGangs: the pods of a Workload API PodGroup of minCount 3, 3-CPU workers one per m5.xlarge, are held while
// two exist (a pod created after them, outside the gang, gets its node and binds meanwhile: no node is launched
// for the incomplete gang); with the third, the NodePool's limit leaves room for two of the three nodes, so the
// provisioner plans none of them and each says why; with the limit raised, all three launch and bind.
func checkGangs(t *testing.T, sb *sandbox.Sandbox, _ minor) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "gang-marker", "gang-marker", noConsolidation)
	harness.NodePool(t, sb, "gang", "gang", noConsolidation, harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
		})
	group := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}}
	if _, err := sb.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, group, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup: %v", err)
	}
	worker := func(name string) *corev1.Pod {
		p := harness.Isolated(harness.Pod(ns, name, "3", "1Gi"), "gang")
		p.Labels["app"] = "worker"
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group.Name}
		return p
	}
	names := []string{"worker-0", "worker-1", "worker-2"}
	harness.CreatePods(t, sb, worker(names[0]), worker(names[1]))
	harness.CreatePods(t, sb, harness.Isolated(harness.Pod(ns, "marker", "100m", "64Mi"), "gang-marker"))
	harness.WaitBound(t, sb, ns, []string{"marker"})
	for _, name := range names[:2] {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" {
			t.Errorf("%s of an incomplete gang got node %q, nominated %q", name, p.Spec.NodeName, p.Status.NominatedNodeName)
		}
	}
	if claims := harness.NodeClaimsOf(t, sb, "gang"); len(claims) > 0 {
		t.Errorf("%d NodeClaims launched for the incomplete gang", len(claims))
	}

	// the gang complete, with room for two of its three nodes: none is launched
	harness.CreatePods(t, sb, worker(names[2]))
	want := "gang " + ns + "/train needs 3 pods placed at once and only 2 can be"
	harness.WaitEventSaying(t, sb, names[2], provision.ReasonFailedProvision, want)
	if claims := harness.NodeClaimsOf(t, sb, "gang"); len(claims) > 0 {
		t.Errorf("%d NodeClaims launched for a gang that cannot be placed whole", len(claims))
	}
	harness.CheckUnbound(ctx, t, sb, ns, names)

	// room for three: the gang launches and binds whole
	np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, "gang", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range harness.WaitBound(t, sb, ns, names) {
		if p.Labels["app"] == "worker" {
			nodes[p.Spec.NodeName] = true
		}
	}
	if len(nodes) != 3 {
		t.Errorf("the gang's 3 pods are on %d nodes, want one each", len(nodes))
	}
}

// TestNewNodesFollowAnUpgradedControlPlane upgrades the control plane from 1.36 to 1.37 under a running Stevedore,
// as EKS does: the scheduler reads the new version, new nodes launch with 1.37's AMIs, and the nodes launched
// with 1.36's drift and are replaced, until every node runs a 1.37 image.
func TestNewNodesFollowAnUpgradedControlPlane(t *testing.T) {
	var from, to minor
	for _, m := range matrix() {
		switch m.Version {
		case "1.36":
			from = m
		case "1.37":
			to = m
		}
	}
	sb := startWith(t, from, nil, map[string]any{"kubernetesVersionCheckInterval": "2s"})
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "upgrade", "upgrade", noConsolidation)
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "before", 2, "1", "1Gi"), "upgrade")
	harness.WaitRunning(t, sb, ns, "before", 2)
	images := func(t *testing.T) map[string]string {
		out := map[string]string{}
		for _, c := range harness.LiveNodeClaimsOf(t, sb, "upgrade") {
			if c.Status.ImageID != "" {
				out[c.Name] = sb.AWS.EC2.ImageName(c.Status.ImageID)
			}
		}
		return out
	}
	for claim, image := range images(t) {
		if !strings.Contains(image, "-1.36-") {
			t.Fatalf("before the upgrade NodeClaim %s runs %s, not a 1.36 image", claim, image)
		}
	}

	if err := sb.UpgradeControlPlane(context.Background(), binaries(t, to)); err != nil {
		t.Fatalf("upgrading the control plane: %v", err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the EC2NodeClass to say its AMIs are 1.37's", func(ctx context.Context) (bool, error) {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, nil // the new API server may still be starting its informers
		}
		for _, c := range nc.Status.Conditions {
			if c.Type == "KubernetesVersionReady" && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "Kubernetes 1.37") {
				return true, nil
			}
		}
		return false, nil
	})
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "after", 1, "1", "1Gi"), "upgrade")
	harness.WaitRunning(t, sb, ns, "after", 1)
	harness.EventuallyWithin(t, 6*time.Minute, "every node of the NodePool to run a 1.37 image", func(context.Context) (bool, error) {
		imgs := images(t)
		for _, image := range imgs {
			if !strings.Contains(image, "-1.37-") {
				return false, nil
			}
		}
		return len(imgs) > 0, nil
	})
	harness.WaitRunning(t, sb, ns, "before", 2)
	harness.WaitRunning(t, sb, ns, "after", 1)
}

// checkDown stops Stevedore and creates a pod that names no scheduler in an opted-in namespace: the API server
// takes it whatever admits it. Under the MutatingAdmissionPolicy (evaluated by the API server) it still names
// stevedore and waits; under Stevedore's webhook, which no replica answers, it is created as written, for the
// default scheduler.
func checkDown(t *testing.T, sb *sandbox.Sandbox, m minor) {
	ctx := context.Background()
	ns := harness.OptedInNamespace(t, sb)
	if err := sb.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	down := harness.Pod(ns, "down", "100m", "64Mi")
	down.Spec.SchedulerName = "" // as a workload writes it
	pod, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, down, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("with Stevedore down, creating a pod in an opted-in namespace is refused: %v", err)
	}
	want := harness.StevedoreSchedulerName
	if m.Admission == sandbox.AdmissionWebhook {
		want = corev1.DefaultSchedulerName
	}
	if pod.Spec.SchedulerName != want {
		t.Errorf("with Stevedore down, a pod of an opted-in namespace names %q, want %q", pod.Spec.SchedulerName, want)
	}
}
