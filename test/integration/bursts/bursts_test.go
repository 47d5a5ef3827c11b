/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package bursts applies randomized, seeded mixes of workloads to a live sandbox (pod affinity and anti-affinity
// among pending pods, spread within node affinities and with minDomains, architecture- and zone-specific
// DaemonSets, several NodePools with weights, taints and minValues, preferences, scheduler restarts mid-burst) and
// checks what a user sees: every pod the offline plan can place binds within maxWait of a node that can take it
// being ready, every node launched is used, no pod is deleted on its way to a node, and no pod is ever in the state
// a Karpenter running beside Stevedore would launch a node for.
//
// STEVEDORE_BURSTS sets how many bursts run (default 10; `make soak` runs 200) and STEVEDORE_BURST_SEED the first
// seed (default 1); a failure names its seed, and STEVEDORE_BURSTS=1 STEVEDORE_BURST_SEED=<seed> replays it.
// STEVEDORE_BURST_MIX=placement plays the placement mix (see placementMix) in every burst.
package bursts

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	// instances become nodes 2 s after launch, the sandbox's default: long enough for a burst's later batches to be
	// planned onto nodes still coming up
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 2 * time.Second,
		PluginArgs: map[string]any{"disableDisruption": true}}, func(s *sandbox.Sandbox) { sb = s })
}

const (
	// maxWait is the longest a pod may wait once a node that can take it is ready.
	maxWait = 30 * time.Second
	// maxPending is the longest a pod the offline plan places may stay unbound after its creation: a batch
	// window (at most 10 s), a solve, a launch (0.5 s here) and, in a burst with a restart, the scheduler's
	// absence and start.
	maxPending = 60 * time.Second
	// settleWithin bounds a whole burst, launches and restarts included.
	settleWithin = 4 * time.Minute
)

func TestRandomBurstsBindAsSoonAsTheirNodesAreReady(t *testing.T) {
	count, first := envInt(t, "STEVEDORE_BURSTS", 10), envInt(t, "STEVEDORE_BURST_SEED", 1)
	var all []podWait
	failed := 0
	for seed := first; seed < first+count; seed++ {
		ok := t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			all = append(all, runBurst(t, uint64(seed))...) //nolint:gosec // G115: any int is a seed; a negative one wraps to the same seed every time
		})
		if !ok {
			failed++
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].wait > all[j].wait })
	if len(all) > 0 {
		s := all[0]
		t.Logf("%d bursts (%d failed), %d pods: slowest wait after a node could take the pod %s (pod %s, seed %d); median %s",
			count, failed, len(all), s.wait.Round(time.Millisecond), s.pod, s.seed, all[len(all)/2].wait.Round(time.Millisecond))
		sort.Slice(all, func(i, j int) bool { return all[i].pending > all[j].pending })
		s = all[0]
		t.Logf("slowest from creation to binding %s (pod %s, seed %d); median %s", s.pending.Round(time.Millisecond), s.pod, s.seed,
			all[len(all)/2].pending.Round(time.Millisecond))
	}
	if n, within, parked, ok := sandbox.ReadyNodeWaits(); ok {
		t.Logf("the scheduler's stevedore_pods_ready_node_wait_seconds: %d pods, each within %gs of its planned node being ready; "+
			"stevedore_pods_parked_on_ready_node now %g", n, within, parked)
	}
}

// podWait is how long a pod waited after a node that could take it was ready, and after its creation.
type podWait struct {
	seed          uint64
	pod           string
	wait, pending time.Duration
}

func runBurst(t *testing.T, seed uint64) []podWait {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	b := generate(seed, ns, os.Getenv("STEVEDORE_BURST_MIX") == "placement")
	t.Logf("seed %d:\n  %s", seed, joinLines(b.story))
	placeable := offlinePlaceable(t, b)
	harness.NodeClass(t, sb)
	for _, np := range b.pools {
		if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { cleanUp(t, b, ns) })
	w := watch(t, ns, b)
	for _, ds := range b.daemons {
		if _, err := sb.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// last first: a Deployment's required pod affinity names an earlier one only, so its pods are pending when their
	// partners arrive and are planned with them. Created the other way, a slow ReplicaSet controller can put the
	// partners in a batch of their own, planned onto nodes the later pods cannot use (docs/scheduling.md).
	for _, d := range slices.Backward(b.workloads) {
		if _, err := sb.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	restarted := restart(t, b)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, settleWithin, false, func(context.Context) (bool, error) {
		return restarted() && w.settled(placeable) && daemonsReady(ctx, ns), nil
	})
	if err != nil {
		harness.DumpUnbound(t, sb, ns)
		w.dump(t)
		t.Logf("scheduler restart done: %v; DaemonSets ready: %v", restarted(), daemonsReady(ctx, ns))
		if list, err := sb.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, ds := range list.Items {
				t.Logf("DaemonSet %s: generation %d observed %d, desired %d, ready %d", ds.Name, ds.Generation,
					ds.Status.ObservedGeneration, ds.Status.DesiredNumberScheduled, ds.Status.NumberReady)
			}
		}
		dumpDaemonPods(ctx, t, ns)
		t.Fatalf("seed %d: the burst did not settle within %s (every pod the offline plan places bound, every DaemonSet ready): %v; "+
			"placeable per Deployment: %v", seed, settleWithin, err, placeable)
	}
	waits := w.waits(seed)
	for _, pw := range waits {
		if pw.wait > maxWait {
			t.Errorf("seed %d: pod %s waited %s after a node that could take it was ready", seed, pw.pod, pw.wait.Round(time.Millisecond))
		}
		if pw.pending > maxPending {
			t.Errorf("seed %d: pod %s was bound %s after its creation", seed, pw.pod, pw.pending.Round(time.Millisecond))
		}
	}
	if unused := w.unusedNodes(); len(unused) > 0 {
		w.dump(t)
		t.Errorf("seed %d: nodes launched that no pod of the burst uses (launched twice for the same pods?): %v", seed, unused)
	}
	w.mu.Lock()
	if len(w.karpenter) > 0 {
		t.Errorf("seed %d: pods a Karpenter beside Stevedore would launch nodes for (unschedulable, not nominated, not kept off its nodes): %v",
			seed, slices.Sorted(maps.Keys(w.karpenter)))
	}
	t.Logf("seed %d: %d pod updates in the state Karpenter provisions for, every one kept off Karpenter's nodes by the admission policy", seed, w.provisionable)
	w.mu.Unlock()
	if n := taintEvictions(ctx, t, ns); n > 0 {
		t.Errorf("seed %d: %d pods deleted by taint eviction", seed, n)
	}
	return waits
}

// offlinePlaceable solves the burst offline (`scheduler plan`): how many pods of each Deployment a NodePool can
// take.
func offlinePlaceable(t *testing.T, b *burst) map[string]int {
	t.Helper()
	objs := []runtime.Object{harness.NewNodeClass()}
	// the cluster's nodes (bootstrap nodes, nodes of earlier bursts going away) are spread domains too
	nodes, err := sb.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := nodes.Items[i].DeepCopy()
		delete(n.Labels, stevedorev1.LabelNodePool) // not a NodePool of this burst: only a node
		objs = append(objs, n)
	}
	for _, np := range b.pools {
		objs = append(objs, np.DeepCopy())
	}
	for _, d := range b.workloads {
		objs = append(objs, d.DeepCopy())
	}
	for _, ds := range b.daemons {
		objs = append(objs, ds.DeepCopy())
	}
	p, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := solver.NewSolver(sim).Solve(context.Background(), p.Input(0))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, pod := range p.Pods {
		if why, no := plan.Unschedulable[pod.UID]; no {
			t.Logf("offline plan: a pod of %s has no node: %s", pod.Labels["app"], why)
			continue
		}
		out[pod.Labels["app"]]++
	}
	return out
}

// watcher records, as the test sees them, when each pod of the burst was created and bound (and where), and when
// each node of the burst's NodeClaims became ready for pods.
type watcher struct {
	mu      sync.Mutex
	created map[types.UID]time.Time
	bound   map[types.UID]time.Time
	pods    map[types.UID]*corev1.Pod
	ready   map[string]time.Time // by node name
	claims  map[string]*stevedorev1.NodeClaim
	pools   map[string]bool
	// provisionable counts the pod updates seen in the state a Karpenter beside Stevedore launches for
	// (karpenterProvisionable); karpenter names the pods of those that no term of the admission policy kept off
	// Karpenter's nodes.
	provisionable int
	karpenter     map[string]bool
}

// karpenterProvisionable reports whether Karpenter would launch a node for the pod, whatever its scheduler
// (kubernetes-sigs/karpenter's IsProvisionable): kube-scheduler marked it PodScheduled=False/Unschedulable, it
// is not bound and not nominated, and no DaemonSet or node owns it.
func karpenterProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" || isDaemonSetPod(pod) {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Node" {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func watch(t *testing.T, ns string, b *burst) *watcher {
	w := &watcher{created: map[types.UID]time.Time{}, bound: map[types.UID]time.Time{}, pods: map[types.UID]*corev1.Pod{},
		ready: map[string]time.Time{}, claims: map[string]*stevedorev1.NodeClaim{}, pools: map[string]bool{}, karpenter: map[string]bool{}}
	for _, np := range b.pools {
		w.pools[np.Name] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kf := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace(ns))
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || isDaemonSetPod(pod) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.created[pod.UID]; !seen {
			w.created[pod.UID] = now
		}
		if _, seen := w.bound[pod.UID]; !seen && pod.Spec.NodeName != "" {
			w.bound[pod.UID] = now
		}
		w.pods[pod.UID] = pod
		if karpenterProvisionable(pod) {
			w.provisionable++
			if !sandbox.KeptOffKarpenter(pod) {
				w.karpenter[pod.Name] = true
			}
		}
	}
	if _, err := kf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	sf := externalversions.NewSharedInformerFactory(sb.Stevedore, 0)
	onClaim := func(obj any) {
		c, ok := obj.(*stevedorev1.NodeClaim)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.pools[c.Labels[stevedorev1.LabelNodePool]] {
			return
		}
		w.claims[c.Name] = c
		if _, seen := w.ready[c.Status.NodeName]; !seen && c.Status.NodeName != "" && initialized(c) {
			w.ready[c.Status.NodeName] = time.Now()
		}
	}
	if _, err := sf.Stevedore().V1().NodeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	sf.Start(ctx.Done())
	kf.WaitForCacheSync(ctx.Done())
	sf.WaitForCacheSync(ctx.Done())
	return w
}

func initialized(c *stevedorev1.NodeClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized && cond.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// settled reports whether every Deployment has at least its placeable number of pods bound and every NodeClaim of
// the burst is ready.
func (w *watcher) settled(placeable map[string]int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	bound := map[string]int{}
	for uid, pod := range w.pods {
		if _, ok := w.bound[uid]; ok && pod.DeletionTimestamp == nil {
			bound[pod.Labels["app"]]++
		}
	}
	for app, n := range placeable {
		if bound[app] < n {
			return false
		}
	}
	for _, c := range w.claims {
		if c.DeletionTimestamp == nil && !initialized(c) {
			return false
		}
	}
	return true
}

// waits returns, for every bound pod of the burst, how long it waited after the later of its creation and the
// moment its node was ready.
func (w *watcher) waits(seed uint64) []podWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []podWait
	for uid, at := range w.bound {
		pod := w.pods[uid]
		ready, ok := w.ready[pod.Spec.NodeName]
		if !ok {
			continue // bound to a node that was no NodeClaim's of the burst
		}
		created := w.created[uid]
		start := created
		if ready.After(start) {
			start = ready
		}
		out = append(out, podWait{seed: seed, pod: pod.Name, wait: max(0, at.Sub(start)), pending: at.Sub(created)})
	}
	return out
}

// unusedNodes names the NodeClaims of the burst whose node no pod of the burst's Deployments is bound to.
func (w *watcher) unusedNodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	used := map[string]bool{}
	for uid := range w.bound {
		if pod := w.pods[uid]; pod.DeletionTimestamp == nil {
			used[pod.Spec.NodeName] = true
		}
	}
	var out []string
	for _, c := range w.claims {
		if c.DeletionTimestamp == nil && !used[c.Status.NodeName] {
			out = append(out, fmt.Sprintf("%s (node %s, %s)", c.Name, c.Status.NodeName, c.Status.InstanceType))
		}
	}
	sort.Strings(out)
	return out
}

func (w *watcher) dump(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.claims))
	for name := range w.claims {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := w.claims[name]
		var on []string
		for _, pod := range w.pods {
			if pod.Spec.NodeName != "" && pod.Spec.NodeName == c.Status.NodeName {
				on = append(on, pod.Name)
			}
		}
		sort.Strings(on)
		t.Logf("NodeClaim %s node %s %s %s ready=%v deleting=%v pods %v", name, c.Status.NodeName, c.Status.InstanceType,
			c.Status.Zone, initialized(c), c.DeletionTimestamp != nil, on)
	}
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// dumpDaemonPods logs each DaemonSet pod with its node, phase and readiness, and each node that has none.
func dumpDaemonPods(ctx context.Context, t *testing.T, ns string) {
	pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isDaemonSetPod(pod) {
			continue
		}
		ready := "unknown"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = string(c.Status)
			}
		}
		t.Logf("DaemonSet pod %s on %q: phase %s, ready %s, deleting %v, created %s", pod.Name, pod.Spec.NodeName,
			pod.Status.Phase, ready, pod.DeletionTimestamp != nil, pod.CreationTimestamp.Format(time.RFC3339))
	}
	nodes, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		ready := "unknown"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status)
			}
		}
		t.Logf("node %s: arch %s, ready %s, unschedulable %v, taints %d, annotations %v", n.Name,
			n.Labels[corev1.LabelArchStable], ready, n.Spec.Unschedulable, len(n.Spec.Taints), n.Annotations)
	}
}

// daemonsReady reports whether every DaemonSet of the namespace runs a ready pod on each node it selects.
func daemonsReady(ctx context.Context, ns string) bool {
	list, err := sb.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, ds := range list.Items {
		if ds.Status.ObservedGeneration < ds.Generation || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
			return false
		}
	}
	return true
}

// restart stops the scheduler restartAfter the apply and starts it again restartGap later; the returned function
// reports whether that is done (at once when the burst has no restart). A test that ends early still waits for
// the scheduler to be back, for the bursts after it.
func restart(t *testing.T, b *burst) func() bool {
	if b.restartAfter == 0 {
		return func() bool { return true }
	}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		time.Sleep(time.Duration(b.restartAfter * float64(time.Second))) // when the fault strikes, not a wait for a condition
		if err = sb.StopScheduler(); err != nil {
			return
		}
		time.Sleep(time.Duration(b.restartGap * float64(time.Second)))
		err = sb.StartScheduler(context.Background())
	}()
	t.Cleanup(func() {
		<-done
		if err != nil {
			t.Errorf("restarting the scheduler: %v", err)
		}
	})
	return func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// taintEvictions counts the pods of the namespace kube-controller-manager's taint-eviction controller deleted.
func taintEvictions(ctx context.Context, t *testing.T, ns string) int {
	list, err := sb.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		if ev.Reason == "TaintManagerEviction" {
			n++
		}
	}
	return n
}

// cleanUp deletes the burst's workloads, then its NodePools, and waits for their nodes to go.
func cleanUp(t *testing.T, b *burst, ns string) {
	ctx := context.Background()
	background := metav1.DeletePropagationBackground
	for _, d := range b.workloads {
		_ = sb.Kube.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	}
	for _, ds := range b.daemons {
		_ = sb.Kube.AppsV1().DaemonSets(ns).Delete(ctx, ds.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	}
	for _, np := range b.pools {
		harness.DeleteNodePool(t, sb, np.Name)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }
