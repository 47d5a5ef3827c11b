/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
	"github.com/stevedore-dev/stevedore/test/karpenter"
)

// BenchmarkBesideKarpenterLive1000, 3000, 5000 and 20000 scale a workload out from nothing, once with Stevedore (the
// scheduler binary with its production profile) and once with Karpenter's own controller (its kwok cloud provider)
// beside kube-scheduler (the same binary with the Stevedore plugins taken out of its profile, and the same client
// rate limits), each in a fresh sandbox on this machine, alternating which goes first, for
// $STEVEDORE_LIVE_ROUNDS rounds (default 3; 1 at 20000 pods). The workload is what a user scales: two Deployments
// of pods requesting 700m and 1Gi, a tenth of them spread over zones (maxSkew 1), on 4-vCPU on-demand amd64 types,
// launches instant on both sides. Each run reports the time from the Deployments' creation until every pod is
// Running, the part of it after the last pod was created, the rate pods were bound at, the nodes launched, the CPU
// seconds and peak RSS of the autoscaling processes (Stevedore's scheduler; Karpenter and kube-scheduler), the
// sandbox's CPU seconds and the API writes per pod, by verb and resource; Stevedore's side also the hourly cost of
// its nodes over the offline plan's (`scheduler plan`) for the same pods. The summary gives the medians and ranges.
// $STEVEDORE_LIVE_SIDES=stevedore (or karpenter) runs one side only.
//
// It needs $KARPENTER_KWOK_BIN (Karpenter's kwok provider, built from sigs.k8s.io/karpenter/kwok) and
// $KARPENTER_CRDS (the folder of its CRDs, kwok/charts/crds of the same checkout); hack/bench-karpenter-live.sh
// builds both in a scratch folder. Without them it is skipped.
func BenchmarkBesideKarpenterLive1000(b *testing.B)  { besideKarpenterLive(b, 1000, 3) }
func BenchmarkBesideKarpenterLive3000(b *testing.B)  { besideKarpenterLive(b, 3000, 3) }
func BenchmarkBesideKarpenterLive5000(b *testing.B)  { besideKarpenterLive(b, 5000, 3) }
func BenchmarkBesideKarpenterLive20000(b *testing.B) { besideKarpenterLive(b, 20000, 1) }

// liveRun is one side's figures in one round.
type liveRun struct {
	total, afterCreated time.Duration
	nodes               int
	// cpuSeconds sums the autoscaling processes' CPU; peakRSS is the largest of their peak RSS (Stevedore's scheduler,
	// Karpenter's controller)
	cpuSeconds, peakRSS float64
	sandboxCPU          float64
	// writes are the API writes while the pods came up, by "VERB resource[/subresource]"; ownWrites those of the
	// autoscaling processes (Stevedore's scheduler; Karpenter and kube-scheduler), read from the API server's audit
	// log
	writes, ownWrites map[string]float64
	// bindRate is the pods bound per second between the first binding and the last
	bindRate float64
	// cost is the nodes' hourly price over the offline plan's for the same pods (Stevedore's side; 0 on Karpenter's)
	cost float64
}

func (r liveRun) writesTotal() float64 { return sum(r.writes) }

// ownWritesTotal is the autoscaling processes' writes.
func (r liveRun) ownWritesTotal() float64 { return sum(r.ownWrites) }

func sum(counts map[string]float64) float64 {
	total := 0.0
	for _, v := range counts {
		total += v
	}
	return total
}

func besideKarpenterLive(b *testing.B, n int32, defaultRounds int) {
	karpenterBin, crds := os.Getenv("KARPENTER_KWOK_BIN"), os.Getenv("KARPENTER_CRDS")
	sides := os.Getenv("STEVEDORE_LIVE_SIDES")
	if sides == "" {
		sides = "stevedore karpenter"
	}
	if strings.Contains(sides, "karpenter") && (karpenterBin == "" || crds == "") {
		b.Skip("KARPENTER_KWOK_BIN and KARPENTER_CRDS are not set (hack/bench-karpenter-live.sh sets them)")
	}
	rounds := defaultRounds
	if v := os.Getenv("STEVEDORE_LIVE_ROUNDS"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 {
			b.Fatalf("STEVEDORE_LIVE_ROUNDS=%q: not a positive number", v)
		}
		rounds = r
	}
	bin := schedulerBinary(b)
	runs := map[string][]liveRun{}
	side := func(name string, round int, run func(*testing.B) liveRun) {
		if !strings.Contains(sides, name) {
			return
		}
		b.Run(fmt.Sprintf("round%d-%s", round, name), func(b *testing.B) {
			r := run(b)
			runs[name] = append(runs[name], r)
			b.ReportMetric(r.total.Seconds(), "s-until-all-running")
			b.ReportMetric(r.afterCreated.Seconds(), "s-last-created-to-all-running")
			b.ReportMetric(float64(r.nodes), "nodes")
			b.ReportMetric(r.cpuSeconds, "autoscaler-CPU-s")
			b.ReportMetric(1000*r.cpuSeconds/float64(n), "autoscaler-CPU-ms/pod")
			b.ReportMetric(r.peakRSS/(1<<20), "autoscaler-peak-RSS-MiB")
			b.ReportMetric(r.sandboxCPU, "sandbox-CPU-s")
			b.ReportMetric(r.writesTotal()/float64(n), "API-writes/pod")
			b.ReportMetric(r.ownWritesTotal()/float64(n), "autoscaler-API-writes/pod")
			b.ReportMetric(r.bindRate, "pods-bound/s")
			if r.cost > 0 {
				b.ReportMetric(r.cost, "cost/offline-plan")
			}
		})
	}
	stevedore := func(b *testing.B) liveRun { return liveStevedore(b, bin, n) }
	karpenterSide := func(b *testing.B) liveRun { return liveKarpenter(b, bin, karpenterBin, crds, n) }
	for r := 1; r <= rounds; r++ {
		if r%2 == 1 {
			side("stevedore", r, stevedore)
			side("karpenter", r, karpenterSide)
		} else {
			side("karpenter", r, karpenterSide)
			side("stevedore", r, stevedore)
		}
	}
	if len(runs["stevedore"]) != rounds || len(runs["karpenter"]) != rounds {
		return // a round failed and said why, or one side only ran
	}
	b.Run("summary", func(b *testing.B) { liveSummary(b, runs["stevedore"], runs["karpenter"], n) })
}

// liveSummary reports the medians of both sides and the ratios, and logs the writes per pod by kind.
func liveSummary(b *testing.B, s, k []liveRun, n int32) {
	total := func(r liveRun) float64 { return r.total.Seconds() }
	after := func(r liveRun) float64 { return r.afterCreated.Seconds() }
	perPod := func(r liveRun) float64 { return r.writesTotal() / float64(n) }
	ownPerPod := func(r liveRun) float64 { return r.ownWritesTotal() / float64(n) }
	b.ReportMetric(median(s, total), "stevedore-s-until-all-running")
	b.ReportMetric(median(k, total), "karpenter-s-until-all-running")
	b.ReportMetric(median(s, after), "stevedore-s-last-created-to-all-running")
	b.ReportMetric(median(k, after), "karpenter-s-last-created-to-all-running")
	ratios := make([]float64, len(s))
	writeRatios, ownWriteRatios := make([]float64, len(s)), make([]float64, len(s))
	for i := range ratios {
		ratios[i] = k[i].total.Seconds() / s[i].total.Seconds()
		writeRatios[i] = s[i].writesTotal() / k[i].writesTotal()
		ownWriteRatios[i] = s[i].ownWritesTotal() / k[i].ownWritesTotal()
	}
	b.ReportMetric(median(k, total)/median(s, total), "speed-up")
	b.ReportMetric(slices.Min(ratios), "speed-up-min")
	b.ReportMetric(slices.Max(ratios), "speed-up-max")
	b.ReportMetric(median(s, perPod), "stevedore-API-writes/pod")
	b.ReportMetric(median(k, perPod), "karpenter-API-writes/pod")
	b.ReportMetric(slices.Max(writeRatios), "writes-ratio-max")
	b.ReportMetric(median(s, ownPerPod), "stevedore-autoscaler-API-writes/pod")
	b.ReportMetric(median(k, ownPerPod), "karpenter-autoscaler-API-writes/pod")
	b.ReportMetric(slices.Max(ownWriteRatios), "autoscaler-writes-ratio-max")
	b.ReportMetric(median(s, func(r liveRun) float64 { return float64(r.nodes) }), "stevedore-nodes")
	b.ReportMetric(median(k, func(r liveRun) float64 { return float64(r.nodes) }), "karpenter-nodes")
	b.ReportMetric(median(s, func(r liveRun) float64 { return r.cpuSeconds }), "stevedore-CPU-s")
	b.ReportMetric(median(k, func(r liveRun) float64 { return r.cpuSeconds }), "karpenter-CPU-s")
	b.ReportMetric(median(s, func(r liveRun) float64 { return 1000 * r.cpuSeconds / float64(n) }), "stevedore-CPU-ms/pod")
	b.ReportMetric(median(s, func(r liveRun) float64 { return r.peakRSS / (1 << 20) }), "stevedore-peak-RSS-MiB")
	b.ReportMetric(median(k, func(r liveRun) float64 { return r.peakRSS / (1 << 20) }), "karpenter-peak-RSS-MiB")
	b.ReportMetric(median(s, func(r liveRun) float64 { return r.cost }), "stevedore-cost/offline-plan")
	b.Logf("per round, Stevedore then Karpenter, s until all Running: %s", roundsOf(s, k))
	all := func(r liveRun) map[string]float64 { return r.writes }
	own := func(r liveRun) map[string]float64 { return r.ownWrites }
	b.Logf("API writes per pod by kind, medians, Stevedore: %s", writesPerPod(s, n, all))
	b.Logf("API writes per pod by kind, medians, Karpenter and kube-scheduler: %s", writesPerPod(k, n, all))
	b.Logf("the autoscaling processes' own API writes per pod by kind, medians, Stevedore: %s", writesPerPod(s, n, own))
	b.Logf("the autoscaling processes' own API writes per pod by kind, medians, Karpenter and kube-scheduler: %s", writesPerPod(k, n, own))
}

// writesPerPod describes the median writes per pod of each kind over the runs (in the counts of returns), largest
// first.
func writesPerPod(runs []liveRun, n int32, of func(liveRun) map[string]float64) string {
	kinds := map[string]bool{}
	for _, r := range runs {
		for k := range of(r) {
			kinds[k] = true
		}
	}
	perPod := map[string]float64{}
	for k := range kinds {
		perPod[k] = median(runs, func(r liveRun) float64 { return of(r)[k] }) / float64(n)
	}
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	for k, v := range perPod {
		if v >= 0.005 {
			rows = append(rows, kv{k, v})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v || rows[i].v == rows[j].v && rows[i].k < rows[j].k })
	parts := make([]string, 0, len(rows))
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %.2f", r.k, r.v))
	}
	return strings.Join(parts, ", ")
}

func median(runs []liveRun, of func(liveRun) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = of(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func roundsOf(s, k []liveRun) string {
	out := ""
	for i := range s {
		out += fmt.Sprintf("[%.1f %.1f] ", s[i].total.Seconds(), k[i].total.Seconds())
	}
	return out
}

// liveDeployments are the workload: n pods of 700m and 1Gi in two Deployments, the second (a tenth of the pods)
// spread over zones.
func liveDeployments(ns, schedulerName string, n int32) []*appsv1.Deployment {
	deployment := func(name string, replicas int32, spread bool) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		spec := corev1.PodSpec{
			SchedulerName:                 schedulerName,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("700m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		}
		if spread {
			spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}
		}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
		}
	}
	spread := n / 10
	return []*appsv1.Deployment{deployment("burst", n-spread, false), deployment("burst-spread", spread, true)}
}

// liveStevedore is one Stevedore run: a NodePool of 4-vCPU on-demand amd64 types, the scheduler binary with the
// production configuration.
func liveStevedore(b *testing.B, bin string, n int32) liveRun {
	audit := newAuditLog(b)
	sb := startSandbox(b, false, audit.args...)
	pid, port, _ := runScheduler(b, bin, "../../config/scheduler-config.yaml", sb)
	harness.NodeClass(b, sb)
	np := harness.NewNodePool("live", "live", func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Taints = nil
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
		np.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
			{Key: stevedorev1.LabelInstanceCPU, Operator: "In", Values: []string{"4"}},
			{Key: stevedorev1.LabelCapacityType, Operator: "In", Values: []string{stevedorev1.CapacityTypeOnDemand}},
			{Key: corev1.LabelArchStable, Operator: "In", Values: []string{"amd64"}},
		}
	})
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitNodePoolReady(b, sb, schema.GroupVersionResource{Group: stevedorev1.SchemeGroupVersion.Group, Version: "v1", Resource: "nodepools"}, np.Name)
	start := time.Now()
	profiled := profileScheduler(port)
	profileSelf(b, "STEVEDORE_SANDBOX_PROFILE")
	r, pods := runWorkload(b, sb, audit, harness.StevedoreSchedulerName, n)
	if err := <-profiled; err != nil {
		b.Errorf("profiling the scheduler: %v", err)
	}
	if err := heapProfile(port); err != nil {
		b.Errorf("the scheduler's heap profile: %v", err)
	}
	claims := harness.LiveNodeClaimsOf(b, sb, "live")
	r.nodes = len(claims)
	r.peakRSS, r.cpuSeconds = procStats(b, pid)
	cost := 0.0
	for _, c := range claims {
		cost += stevedorev1.ParsePrice(c.Status.Price)
	}
	objs := []runtime.Object{np.DeepCopy()}
	var cpu, mem float64
	for _, obj := range pods {
		objs = append(objs, obj)
		req := obj.(*corev1.Pod).Spec.Containers[0].Resources.Requests
		cpu += float64(req.Cpu().MilliValue())
		mem += float64(req.Memory().Value())
	}
	if _, plan := solveOffline(b, objs, cpu, mem); plan > 0 {
		r.cost = cost / plan
	}
	b.Logf("nodes $%.4f/h, %.4fx the offline plan; seconds from the Deployments' creation (first, median, last): %s", cost, r.cost,
		claimTimeline(start, claims))
	b.Logf("scheduler counters: %s", schedulerCounters(b, port, "stevedore_pods_woken_total", "stevedore_pods_admitted_total",
		"stevedore_provisioning_unschedulable_pods_total", "stevedore_deletion_cost_pod_patches_total",
		"scheduler_schedule_attempts_total"))
	b.Logf("FailedScheduling events by note: %s", failedSchedulingNotes(b, sb, 4))
	return r
}

// liveKarpenter is one Karpenter run: its CRDs, a NodePool and KWOKNodeClass, its kwok provider and
// kube-scheduler as processes of their own.
func liveKarpenter(b *testing.B, schedulerBin, karpenterBin, crds string, n int32) liveRun {
	ctx := context.Background()
	audit := newAuditLog(b)
	sb := startSandbox(b, false, audit.args...)
	// the sandbox's own default scheduler stands in for the control plane's; here kube-scheduler runs as its own
	// process, so that its CPU is counted on Karpenter's side, and two schedulers would race to bind the pods
	if err := sb.StopScheduler(); err != nil {
		b.Fatal(err)
	}
	installCRDFolder(b, sb, crds)
	dyn, err := dynamic.NewForConfig(sb.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	for _, doc := range splitYAML(karpenter.NodeClassAndPool("live")) {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			b.Fatal(err)
		}
		gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
		gvr := gv.WithResource(map[string]string{"KWOKNodeClass": "kwoknodeclasses", "NodePool": "nodepools"}[obj.GetKind()])
		if _, err := dyn.Resource(gvr).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	karpenterPID := karpenter.Start(b, karpenterBin, sb.Kubeconfig(), karpenter.InstanceTypes(b, catalog.Default().Zones())).Pid()
	schedulerPID, _, _ := runScheduler(b, schedulerBin, kubeSchedulerConfig(b), sb)
	waitNodePoolReady(b, sb, schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}, "live")
	r, _ := runWorkload(b, sb, audit, corev1.DefaultSchedulerName, n)
	claims, err := dyn.Resource(schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r.nodes = len(claims.Items)
	karpenterRSS, karpenterCPU := procStats(b, karpenterPID)
	schedulerRSS, schedulerCPU := procStats(b, schedulerPID)
	r.cpuSeconds, r.peakRSS = karpenterCPU+schedulerCPU, karpenterRSS
	b.Logf("Karpenter: %.1f CPU s, peak RSS %.0f MiB; kube-scheduler: %.1f CPU s, peak RSS %.0f MiB", karpenterCPU, karpenterRSS/(1<<20),
		schedulerCPU, schedulerRSS/(1<<20))
	return r
}

// kubeSchedulerConfig is the production configuration with the Stevedore plugins taken out and the default
// scheduler's name: kube-scheduler as Karpenter's users run it, with the same client rate limits as Stevedore's.
func kubeSchedulerConfig(b *testing.B) string {
	return schedulerConfigWith(b, "kube-scheduler.yaml", func(config map[string]any) {
		config["leaderElection"] = map[string]any{"leaderElect": true, "resourceName": "kube-scheduler", "resourceNamespace": "kube-system"}
		config["profiles"] = []any{map[string]any{"schedulerName": corev1.DefaultSchedulerName}}
	})
}

// installCRDFolder creates every CustomResourceDefinition in the folder's YAML files.
func installCRDFolder(b *testing.B, sb *sandbox.Sandbox, dir string) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no CRDs in %s (%v)", dir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if files[p], err = os.ReadFile(p); err != nil { //nolint:gosec // G304: the benchmark runner's own $KARPENTER_CRDS
			b.Fatal(err)
		}
	}
	if err := sandbox.InstallCRDs(context.Background(), sb.RESTConfig, files); err != nil {
		b.Fatal(err)
	}
}

// waitNodePoolReady waits until the NodePool (of either API) has condition Ready True: the autoscaler is up and
// has read it.
func waitNodePoolReady(b *testing.B, sb *sandbox.Sandbox, gvr schema.GroupVersionResource, name string) {
	dyn, err := dynamic.NewForConfig(sb.RESTConfig)
	if err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		np, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(np.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("NodePool %s (%s) not Ready: %v", name, gvr.GroupResource(), err)
	}
}

// runWorkload creates the Deployments in a fresh namespace and times them until every pod is Running; it returns the
// run's figures and the pods as they came up (for the offline plan of the same pods).
func runWorkload(b *testing.B, sb *sandbox.Sandbox, audit *auditLog, schedulerName string, n int32) (liveRun, []runtime.Object) {
	ctx := context.Background()
	ns := harness.Namespace(b, sb)
	factory := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace(ns))
	podInformer := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	seen, bound, running := map[string]bool{}, map[string]bool{}, map[string]bool{}
	pods := map[string]*corev1.Pod{}
	var lastCreated, allRunning, firstBound, lastBound time.Time
	observe := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if !seen[pod.Name] {
			seen[pod.Name] = true
			if len(seen) == int(n) {
				lastCreated = now
			}
		}
		if pod.Spec.NodeName != "" && !bound[pod.Name] {
			bound[pod.Name] = true
			if firstBound.IsZero() {
				firstBound = now
			}
			lastBound = now
		}
		if _, ok := pods[pod.Name]; !ok {
			pods[pod.Name] = pod
		}
		if pod.Status.Phase == corev1.PodRunning && !running[pod.Name] {
			running[pod.Name] = true
			if len(running) == int(n) {
				allRunning = now
			}
		}
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe,
		UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		b.Fatal(err)
	}
	// the cluster's nodes, for the progress the run logs every 10 s
	nodeFactory := informers.NewSharedInformerFactory(sb.Kube, 0)
	nodes := nodeFactory.Core().V1().Nodes().Lister()
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown(); nodeFactory.Shutdown() }()
	factory.Start(stop)
	nodeFactory.Start(stop)
	factory.WaitForCacheSync(stop)
	nodeFactory.WaitForCacheSync(stop)
	var progress []string
	sample := func(at time.Duration) {
		all, _ := nodes.List(labels.Everything())
		ready := 0
		for _, node := range all {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		progress = append(progress, fmt.Sprintf("%.0fs %d/%d/%d %d/%d", at.Seconds(), len(seen), len(bound), len(running), ready, len(all)))
	}
	requestsBefore, auditBefore := apiRequests(b), audit.offset(b)
	_, sandboxCPUBefore := procStats(b, os.Getpid())
	b.ResetTimer()
	start := time.Now()
	next := 10 * time.Second
	for _, d := range liveDeployments(ns, schedulerName, n) {
		if _, err := sb.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if at := time.Since(start); at >= next {
			sample(at)
			next += 10 * time.Second
		}
		return !allRunning.IsZero(), nil
	})
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	b.Logf("every 10 s: pods created/bound/Running, nodes Ready/all: %s", strings.Join(progress, "; "))
	_, sandboxCPU := procStats(b, os.Getpid())
	writes := writesSince(requestsBefore, apiRequests(b))
	total, kinds := apiWrites(requestsBefore, apiRequests(b), 24)
	ownWrites, ownWriters := audit.autoscalerWrites(b, auditBefore)
	b.Logf("sandbox CPU %.1f s; API writes: %.0f (%s); events: %s", sandboxCPU-sandboxCPUBefore, total, kinds, eventsByReason(b, sb, 8))
	b.Logf("the autoscaling processes' own API writes: %.0f (%s); by user agent: %s", sum(ownWrites), largest(ownWrites, 24),
		largest(ownWriters, 8))
	if err != nil {
		b.Fatalf("waiting for %d pods Running: %d created, %d Running: %v", n, len(seen), len(running), err)
	}
	r := liveRun{total: allRunning.Sub(start), afterCreated: allRunning.Sub(lastCreated), sandboxCPU: sandboxCPU - sandboxCPUBefore,
		writes: writes, ownWrites: ownWrites}
	if d := lastBound.Sub(firstBound).Seconds(); d > 0 {
		r.bindRate = float64(len(bound)) / d
	}
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]runtime.Object, 0, len(names))
	for _, name := range names {
		pod := pods[name].DeepCopy()
		pod.Spec.NodeName, pod.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
		out = append(out, pod)
	}
	return r, out
}

// splitYAML splits a multi-document YAML string.
func splitYAML(s string) []string {
	var docs []string
	for _, d := range strings.Split(s, "\n---\n") {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}
