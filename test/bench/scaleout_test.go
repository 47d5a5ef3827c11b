/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// BenchmarkScaleOut1000, BenchmarkScaleOut5000 and BenchmarkScaleOut20000 create pending pods of five shapes at once against a sandbox
// (--launch-delay 0) and the real scheduler binary, run as its own process with the production configuration,
// and measure the time until every pod is bound, the nodes launched, their cost against the fractional lower bound
// and against the offline plan of the same pods, and the scheduler process's peak RSS and CPU seconds apart from
// the sandbox's (API server, etcd, controllers, simulated kubelets, in this process). Run with -benchtime 1x.
func BenchmarkScaleOut1000(b *testing.B) { benchmarkScaleOut(b, 1000) }
func BenchmarkScaleOut5000(b *testing.B) { benchmarkScaleOut(b, 5000) }

// BenchmarkScaleOut20000 is the same with 20,000 pods (about 8,700 nodes); it takes most of an hour here.
func BenchmarkScaleOut20000(b *testing.B) { benchmarkScaleOut(b, 20000) }

func benchmarkScaleOut(b *testing.B, n int) {
	for i := 0; i < b.N; i++ {
		scaleOut(b, n)
	}
}

// startSandbox starts a sandbox whose instances register at once (--launch-delay 0), with or without the
// in-process Stevedore scheduler, stopped when the benchmark ends. Without it, Stevedore's CRDs and policy are
// installed as a user would before running the scheduler binary. apiServerArgs are extra kube-apiserver flags.
func startSandbox(b *testing.B, withScheduler bool, apiServerArgs ...string) *sandbox.Sandbox {
	// heartbeats every half hour: thousands of simulated kubelets renewing their Leases every 10 s took a large
	// share of the two cores, and nodes whose renewals fell behind went NotReady under the benchmark
	sb, err := sandbox.Start(context.Background(), sandbox.Options{WithScheduler: withScheduler, LaunchDelay: 0,
		NodeLeaseDuration: 2 * time.Hour, APIServerArgs: apiServerArgs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Stop)
	if !withScheduler {
		if err := sandbox.InstallStevedore(context.Background(), sb.RESTConfig); err != nil {
			b.Fatal(err)
		}
	}
	return sb
}

// schedulerBinary returns $STEVEDORE_BIN or builds the scheduler as the image has it (-tags nosandbox).
func schedulerBinary(b *testing.B) string {
	if p := os.Getenv("STEVEDORE_BIN"); p != "" {
		return p
	}
	out := filepath.Join(b.TempDir(), "scheduler")
	cmd := exec.Command("go", "build", "-tags", "nosandbox", "-o", out, "./cmd/scheduler")
	cmd.Dir = "../.."
	if raw, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the scheduler: %v\n%s", err, raw)
	}
	return out
}

// profileScheduler writes a CPU profile of the scheduler's first STEVEDORE_PROFILE_SECONDS seconds of the
// scale-out to STEVEDORE_PROFILE (both set, else nothing), for `go tool pprof`; STEVEDORE_SANDBOX_PROFILE names
// the file for the same seconds of the sandbox's process.
func profileScheduler(port int) <-chan error {
	done := make(chan error, 1)
	path, seconds := os.Getenv("STEVEDORE_PROFILE"), os.Getenv("STEVEDORE_PROFILE_SECONDS")
	if path == "" || seconds == "" {
		done <- nil
		return done
	}
	go func() {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%s", port, seconds)) //nolint:gosec // G704: the scheduler's own pprof endpoint on loopback; only the seconds come from the environment
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(path, raw, 0o600) //nolint:gosec // G703: the path is the benchmark runner's own $STEVEDORE_PROFILE
		}
		done <- err
	}()
	return done
}

// heapProfile writes the scheduler's heap profile (in use and allocated since it started) to
// STEVEDORE_HEAP_PROFILE when that is set, once every pod is bound, for `go tool pprof`.
func heapProfile(port int) error {
	path := os.Getenv("STEVEDORE_HEAP_PROFILE")
	if path == "" {
		return nil
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/heap", port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600) //nolint:gosec // G703: the path is the benchmark runner's own $STEVEDORE_HEAP_PROFILE
}

func scaleOut(b *testing.B, n int) {
	ctx := context.Background()
	bin := schedulerBinary(b)
	sb := startSandbox(b, false)
	pid, port, _ := runScheduler(b, bin, "../../config/scheduler-config.yaml", sb)
	ns := harness.Namespace(b, sb)
	harness.NodeClass(b, sb)
	// provisioning alone: consolidating the first nodes while later pods still arrive would evict these bare pods
	np, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, harness.NewNodePool("scaleout", "scaleout", func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	}), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		s := podSizes[i%len(podSizes)]
		p := harness.Isolated(harness.Pod(ns, fmt.Sprintf("pod-%05d", i), s.cpu, s.mem), "scaleout")
		p.Labels = map[string]string{"app": "scaleout"}
		pods = append(pods, p)
	}
	watched := podsWatched(b, sb, ns)
	requestsBefore := apiRequests(b)
	b.ResetTimer()
	start := time.Now()
	profiled := profileScheduler(port)
	profileSelf(b, "STEVEDORE_SANDBOX_PROFILE")
	createPods(b, sb, pods)
	created := time.Since(start)
	// counted from a watch: listing thousands of pods from the API server every half second took a growing share
	// of the two cores the sandbox and the scheduler share
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Minute, true, func(context.Context) (bool, error) {
		list, err := watched.Lister().Pods(ns).List(labels.Everything())
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range list {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == n, nil
	})
	if err != nil {
		b.Fatalf("waiting for %d pods bound: %v", n, err)
	}
	took := time.Since(start)
	b.StopTimer()
	if err := heapProfile(port); err != nil {
		b.Errorf("heap profile of the scheduler: %v", err)
	}
	claims := harness.LiveNodeClaimsOf(b, sb, "scaleout")
	cost := 0.0
	for _, c := range claims {
		cost += stevedorev1.ParsePrice(c.Status.Price)
	}
	lower, plan := podBounds(b, np, pods)
	rss, cpu := procStats(b, pid)
	selfRSS, selfCPU := procStats(b, os.Getpid())
	b.ReportMetric(took.Seconds(), "s-until-all-bound")
	b.ReportMetric((took - created).Seconds(), "s-last-created-to-all-bound")
	b.ReportMetric(float64(len(claims)), "nodes")
	b.ReportMetric(cost/lower, "cost/lower-bound")
	b.ReportMetric(cost/plan, "cost/offline-plan")
	b.ReportMetric(rss/(1<<20), "scheduler-peak-RSS-MiB")
	b.ReportMetric(cpu, "scheduler-CPU-s")
	b.ReportMetric(1000*cpu/float64(n), "scheduler-CPU-ms/pod")
	writes, largest := apiWrites(requestsBefore, apiRequests(b), 12)
	b.ReportMetric(writes/float64(n), "API-writes/pod")
	b.Logf("API writes while the pods bound: %.0f; largest: %s", writes, largest)
	b.Logf("events by reporting controller and reason: %s", eventsByReason(b, sb, 12))
	b.Logf("FailedScheduling events by note: %s", failedSchedulingNotes(b, sb, 4))
	b.Logf("seconds from the first pod's creation (first, median, last): %s", claimTimeline(start, claims))
	b.Logf("scheduler counters: %s", schedulerCounters(b, port, "stevedore_pods_woken_total", "stevedore_nodeclaims_created_total",
		"stevedore_provisioning_unschedulable_pods_total", "stevedore_deletion_cost_pod_patches_total",
		"scheduler_schedule_attempts_total", "scheduler_queue_incoming_pods_total", "scheduler_queueing_hint_execution_duration_seconds_count"))
	if err := <-profiled; err != nil {
		b.Errorf("profiling the scheduler: %v", err)
	}
	b.Logf("%d pods created in %s, all bound %s after creation began (%s after the last was created) on %d nodes, $%.4f/h (lower bound $%.4f/h, offline plan $%.4f/h); "+
		"scheduler process: peak RSS %.0f MiB, %.1f CPU s; sandbox and benchmark driver process: peak RSS %.0f MiB, %.1f CPU s",
		n, created.Round(100*time.Millisecond), took.Round(100*time.Millisecond), (took - created).Round(100*time.Millisecond), len(claims), cost, lower, plan, rss/(1<<20), cpu, selfRSS/(1<<20), selfCPU)
}

// claimTimeline says when, counted from start, the NodeClaims were created, launched, registered and initialized:
// the first, the median and the last of each (the conditions' times are to the second).
func claimTimeline(start time.Time, claims []stevedorev1.NodeClaim) string {
	var out []string
	for _, step := range []string{"Created", stevedorev1.ConditionLaunched, stevedorev1.ConditionRegistered, stevedorev1.ConditionInitialized} {
		var at []float64
		for i := range claims {
			c := &claims[i]
			if step == "Created" {
				at = append(at, c.CreationTimestamp.Sub(start).Seconds())
				continue
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, step); cond != nil && cond.Status == metav1.ConditionTrue {
				at = append(at, cond.LastTransitionTime.Sub(start).Seconds())
			}
		}
		if len(at) == 0 {
			continue
		}
		sort.Float64s(at)
		out = append(out, fmt.Sprintf("%s %d: %.0f, %.0f, %.0f", step, len(at), at[0], at[len(at)/2], at[len(at)-1]))
	}
	return strings.Join(out, "; ")
}

// podBounds returns the fractional lower bound of the pods' hourly cost on the NodePool's types and the cost of
// the offline plan (`scheduler plan`) for them.
func podBounds(b *testing.B, np *stevedorev1.NodePool, pods []*corev1.Pod) (lower, plan float64) {
	objs := []runtime.Object{np.DeepCopy()}
	var cpu, mem float64
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
		req := p.Spec.Containers[0].Resources.Requests
		cpu += float64(req.Cpu().MilliValue())
		mem += float64(req.Memory().Value())
	}
	return solveOffline(b, objs, cpu, mem)
}

// procStats reads a process's peak resident memory (bytes) and CPU time (seconds, user + system) from /proc.
func procStats(b *testing.B, pid int) (peakRSS, cpuSeconds float64) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			peakRSS = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// fields after the command name, which is in parentheses and may hold spaces
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return peakRSS, (utime + stime) / 100 // USER_HZ
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// createPods creates the pods from several clients at once, as a ReplicaSet controller does a burst of replicas:
// one at a time, thousands of pods took minutes to create.
func createPods(b *testing.B, sb *sandbox.Sandbox, pods []*corev1.Pod) {
	const creators = 16
	var g errgroup.Group
	g.SetLimit(creators)
	for _, p := range pods {
		g.Go(func() error {
			if _, err := sb.Kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pod %s: %w", p.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// podsWatched is an informer of the namespace's pods, synced, stopped when the benchmark ends.
func podsWatched(b *testing.B, sb *sandbox.Sandbox, ns string) coreinformers.PodInformer {
	factory := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods()
	pods.Informer()
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			b.Fatalf("syncing the %v informer", typ)
		}
	}
	return pods
}
