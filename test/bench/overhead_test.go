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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

const (
	overheadNodes = 60
	overheadPods  = 2500
)

// BenchmarkPluginOverhead measures what Stevedore costs the scheduler's hot path: pods that fit nodes already in
// the cluster. The same scheduler binary schedules batches of plain pods onto 60 existing nodes, once with the
// production profile (Provisioner in PostFilter, Reserve, Permit and PostBind, its informers and background loops
// running) and once with the profile's Stevedore plugins removed, four times each in the order plain, Stevedore,
// Stevedore, plain (twice) so that drift in the sandbox cancels out. It reports pods bound per second between the
// first and the last binding of a batch (seen by a watch), the scheduler process's CPU seconds per 1000 pods over
// that span, and, from a CPU profile of the scheduler taken while the pods bind, the share of its samples spent in
// Stevedore's code: the direct figure, where the first two compare runs that the API server, sharing the two
// cores, makes vary by more than the effect. Both profiles run with the API client's rate limit lifted. Run with
// -benchtime 1x.
func BenchmarkPluginOverhead(b *testing.B) {
	for i := 0; i < b.N; i++ {
		pluginOverhead(b)
	}
}

func pluginOverhead(b *testing.B) {
	bin := schedulerBinary(b)
	sb := startSandbox(b, false)
	createStaticNodes(b, sb, overheadNodes)
	withPlugin, plain := overheadConfigs(b)
	bound := watchBindings(b, sb)

	rates, cpu := map[string][]float64{}, map[string][]float64{}
	var shares []float64
	for i, variant := range []string{"plain", "stevedore", "stevedore", "plain", "plain", "stevedore", "stevedore", "plain"} {
		config := withPlugin
		if variant == "plain" {
			config = plain
		}
		ns := harness.Namespace(b, sb)
		var names []string
		for j := 0; j < overheadPods; j++ {
			p := harness.Pod(ns, fmt.Sprintf("plain-%05d", j), "50m", "64Mi")
			harness.CreatePods(b, sb, p)
			names = append(names, ns+"/"+p.Name)
		}
		pid, port, stop := runScheduler(b, bin, config, sb)
		// the scheduler's CPU time from its first binding of the batch to its last: its start-up (informers,
		// Stevedore's catalog) is left out; with the plugins, a CPU profile of the first seconds of binding
		cpuAtFirst := -1.0
		share := make(chan float64, 1)
		harness.EventuallyWithin(b, 10*time.Minute, fmt.Sprintf("run %d (%s): %d pods bound", i, variant, overheadPods),
			func(context.Context) (bool, error) {
				n := bound.count(names)
				if n > 0 && cpuAtFirst < 0 {
					_, cpuAtFirst = procStats(b, pid)
					if variant == "stevedore" {
						go func() {
							f, err := stevedoreShare(port, 3)
							if err != nil {
								b.Errorf("profiling the scheduler: %v", err)
							}
							share <- f
						}()
					}
				}
				return n == len(names), nil
			})
		_, cpuAtLast := procStats(b, pid)
		if variant == "stevedore" {
			f := <-share
			shares = append(shares, f)
			b.Logf("run %d: Stevedore's code ran in %.1f%% of the scheduler's CPU samples while pods bound", i, 100*f)
		}
		stop()
		first, last := bound.span(names)
		rate := float64(len(names)-1) / last.Sub(first).Seconds()
		perThousand := 1000 * (cpuAtLast - cpuAtFirst) / float64(len(names))
		rates[variant] = append(rates[variant], rate)
		cpu[variant] = append(cpu[variant], perThousand)
		b.Logf("run %d, %s profile: %d pods bound in %s, %.0f pods/s, %.2f scheduler CPU s per 1000 pods", i, variant, len(names),
			last.Sub(first).Round(time.Millisecond), rate, perThousand)
	}
	mean := func(v []float64) float64 {
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		return sum / float64(len(v))
	}
	with, without := mean(rates["stevedore"]), mean(rates["plain"])
	overhead := 100 * (1 - with/without)
	cpuWith, cpuWithout := mean(cpu["stevedore"]), mean(cpu["plain"])
	cpuOverhead := 100 * (cpuWith/cpuWithout - 1)
	b.ReportMetric(without, "pods/s-plain")
	b.ReportMetric(with, "pods/s-stevedore")
	b.ReportMetric(overhead, "throughput-overhead-%")
	b.ReportMetric(cpuOverhead, "cpu-overhead-%")
	b.ReportMetric(100*mean(shares), "stevedore-share-of-scheduler-cpu-%")
	b.Logf("pods that fit existing nodes: %.0f pods/s with Stevedore's plugins, %.0f pods/s without (%.1f%% slower); "+
		"scheduler CPU %.2f s per 1000 pods with, %.2f s without (%.1f%% more); Stevedore's code in %.1f%% of the "+
		"scheduler's CPU samples", with, without, overhead, cpuWith, cpuWithout, cpuOverhead, 100*mean(shares))
}

// createStaticNodes registers n large Nodes simulated by kwok, with no taint, as if a node group made them.
func createStaticNodes(b *testing.B, sb *sandbox.Sandbox, n int) {
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("static-%03d", i)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
			corev1.ResourcePods: resource.MustParse("500"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        names[i],
				Annotations: map[string]string{sandbox.KwokNodeAnnotation: sandbox.KwokNodeValue},
				Labels: map[string]string{
					"kubernetes.io/hostname": names[i], "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"topology.kubernetes.io/zone": fmt.Sprintf("us-east-1%c", 'a'+i%3),
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := sb.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			node, err := sb.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !sandbox.NodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("static nodes not Ready: %v", err)
	}
}

// overheadConfigs writes two copies of the production scheduler configuration: one as it is and one with the
// Stevedore plugins taken out of its profile. Both lift the API client's rate limit (production: 200 qps), which
// otherwise caps bindings at ~270 a second whichever profile runs and hides the scheduler's own cost.
func overheadConfigs(b *testing.B) (withPlugin, plain string) {
	return overheadConfig(b, true), overheadConfig(b, false)
}

func overheadConfig(b *testing.B, withPlugin bool) string {
	name := "stevedore.yaml"
	if !withPlugin {
		name = "plain.yaml"
	}
	return schedulerConfigWith(b, name, func(config map[string]any) {
		config["clientConnection"] = map[string]any{"qps": 10000, "burst": 10000}
		if withPlugin {
			return
		}
		for _, p := range config["profiles"].([]any) {
			profile := p.(map[string]any)
			delete(profile, "plugins")
			delete(profile, "pluginConfig")
		}
	})
}

// schedulerConfigWith writes the production scheduler configuration, changed by change, to a file of that name in
// the benchmark's temporary folder and returns its path.
func schedulerConfigWith(b *testing.B, name string, change func(map[string]any)) string {
	raw, err := os.ReadFile("../../config/scheduler-config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var config map[string]any
	if err := yaml.Unmarshal(raw, &config); err != nil {
		b.Fatal(err)
	}
	change(config)
	out, err := yaml.Marshal(config)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// runScheduler starts the scheduler binary with a configuration against the sandbox, its secure port serving
// /debug/pprof to the benchmark, and returns its pid, that port and how to stop it.
func runScheduler(b *testing.B, bin, config string, sb *sandbox.Sandbox) (pid, port int, stop func()) {
	// the secure port serves /debug/pprof and /metrics, open to the benchmark without credentials
	port = freePort(b)
	cmd := exec.Command(bin, "--config", config, "--kubeconfig", sb.Kubeconfig(), fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1", "--authorization-always-allow-paths=/debug/pprof/*,/healthz,/metrics", "--authentication-tolerate-lookup-failure")
	cmd.Env = os.Environ()
	for k, v := range sb.Env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if path := os.Getenv("STEVEDORE_SCHEDULER_LOG"); path != "" {
		// the whole log, to a file, at -v=$STEVEDORE_SCHEDULER_V (default 2)
		f, err := os.Create(path) //nolint:gosec // G703: the path is the benchmark runner's own $STEVEDORE_SCHEDULER_LOG
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := f.Close(); err != nil {
				b.Logf("closing the scheduler's log %s: %v", path, err)
			}
		})
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&logs, f), io.MultiWriter(&logs, f)
		v := os.Getenv("STEVEDORE_SCHEDULER_V")
		if v == "" {
			v = "2"
		}
		cmd.Args = append(cmd.Args, "-v="+v)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if b.Failed() {
			b.Logf("scheduler log:\n%s", lastLines(logs.String(), 40))
		}
	}
	b.Cleanup(stop)
	return cmd.Process.Pid, port, stop
}

func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// stevedoreShare takes a CPU profile of the scheduler for the given time and returns the share of its samples
// whose stack runs Stevedore's code (plugins, informer handlers, background loops).
func stevedoreShare(port int, seconds int) (float64, error) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the scheduler's self-signed serving cert
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, seconds))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	prof, err := profile.Parse(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parsing the CPU profile: %w", err)
	}
	var total, ours int64
	for _, sample := range prof.Sample {
		n := sample.Value[0]
		total += n
	stack:
		for _, loc := range sample.Location {
			for _, line := range loc.Line {
				if line.Function != nil && strings.HasPrefix(line.Function.Name, "github.com/stevedore-dev/stevedore/") {
					ours += n
					break stack
				}
			}
		}
	}
	if total == 0 {
		return 0, fmt.Errorf("empty CPU profile")
	}
	return float64(ours) / float64(total), nil
}

// bindings records when the benchmark's watch first saw each pod bound.
type bindings struct {
	mu sync.Mutex
	at map[string]time.Time
}

func watchBindings(b *testing.B, sb *sandbox.Sandbox) *bindings {
	w := &bindings{at: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(sb.Kube, 0)
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			w.mu.Lock()
			if _, seen := w.at[p.Namespace+"/"+p.Name]; !seen {
				w.at[p.Namespace+"/"+p.Name] = time.Now()
			}
			w.mu.Unlock()
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return w
}

func (w *bindings) count(names []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := w.at[name]; ok {
			n++
		}
	}
	return n
}

func (w *bindings) span(names []string) (first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range names {
		t := w.at[name]
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}
