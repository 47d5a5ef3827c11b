/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package apipriority checks the shipped FlowSchemas (manifests/deploy/flowcontrol.yaml) on an API server with
// API Priority and Fairness on and few seats: while a noisy ServiceAccount floods it with lists, the requests
// Stevedore's ServiceAccount makes to hold its lease and bind pods are served at kube-scheduler's priority.
package apipriority

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/manifests"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

// TestMain runs an API server with priority and fairness on and twelve seats (eight for reads, four for writes), so
// that a few dozen concurrent lists are enough to make requests queue.
func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{NoBootstrapNodes: true, APIServerArgs: []string{"--enable-priority-and-fairness=true",
		"--max-requests-inflight=8", "--max-mutating-requests-inflight=4"}}, func(s *sandbox.Sandbox) { sb = s })
}

// The identities: Stevedore's ServiceAccount, as the manifests install it, and a noisy one that the cluster's
// service-accounts FlowSchema serves at workload-low.
const (
	stevedoreUser = "system:serviceaccount:stevedore:stevedore"
	noisyUser     = "system:serviceaccount:noise:noisy"
	// noise is the namespace the noisy client lists, of noiseObjects ConfigMaps; rounds is how many lease renewals
	// and binds Stevedore makes under the flood.
	noiseObjects = 1500
	noisyClients = 64
	rounds       = 60
)

// TestStevedoreKeepsItsLeaseAndBindsWhileANoisyClientIsThrottled runs the same flood twice: without the shipped
// FlowSchemas, Stevedore's lease renewals and binds are served at workload-low beside the flood; with them, at
// leader-election and workload-high, and its lists at stevedore-lists. Either way every request of Stevedore's
// must succeed, and the noisy client's lists must queue (it is throttled); the latencies of both runs are logged.
func TestStevedoreKeepsItsLeaseAndBindsWhileANoisyClientIsThrottled(t *testing.T) {
	ctx := harness.Context(t)
	setUp(ctx, t)
	stevedore, levelOf := impersonating(t, stevedoreUser)
	noisy, _ := impersonating(t, noisyUser)

	without := underFlood(ctx, t, stevedore, noisy, levelOf, false)
	with := underFlood(ctx, t, stevedore, noisy, levelOf, true)
	for _, r := range []*floodRun{without, with} {
		t.Logf("FlowSchemas %-5v: lease renewal p50 %v p99 %v max %v; bind p50 %v p99 %v max %v; noisy lists %d, %.0f%% of them queued over 5ms",
			r.withFlowSchemas, r.lease.quantile(0.5), r.lease.quantile(0.99), r.lease.quantile(1), r.bind.quantile(0.5), r.bind.quantile(0.99),
			r.bind.quantile(1), r.noisyLists, 100*r.noisyQueued)
	}
	check := func(r *floodRun, lease, bind, list string) {
		t.Helper()
		if r.errors > 0 {
			t.Errorf("FlowSchemas %v: %d of Stevedore's requests failed under the flood: %s", r.withFlowSchemas, r.errors, r.firstError)
		}
		for what, want := range map[string]string{"lease renewal": lease, "bind": bind, "list": list} {
			if got := r.levels[what]; !slices.Equal(got, []string{want}) {
				t.Errorf("FlowSchemas %v: Stevedore's %ss were served at priority levels %v, want %s", r.withFlowSchemas, what, got, want)
			}
		}
		if r.noisyQueued < 0.5 {
			t.Errorf("FlowSchemas %v: only %.0f%% of the noisy client's lists queued: there was no flood to throttle", r.withFlowSchemas, 100*r.noisyQueued)
		}
	}
	check(without, "workload-low", "workload-low", "workload-low")
	check(with, "leader-election", "workload-high", "stevedore-lists")
}

// setUp creates the two ServiceAccounts' namespaces with cluster-admin rights (the RBAC is not what is tested
// here), a Node to bind to, and the ConfigMaps the flood lists.
func setUp(ctx context.Context, t *testing.T) {
	for _, ns := range []string{"stevedore", "noise"} {
		if _, err := sb.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "apipriority-test"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "stevedore", Namespace: "stevedore"},
			{Kind: rbacv1.ServiceAccountKind, Name: "noisy", Namespace: "noise"}}}
	if _, err := sb.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "apipriority-node"}}
	if _, err := sb.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 512)
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Go(func() {
			for i := range work {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("noise-%04d", i), Namespace: "noise"}, Data: map[string]string{"v": value}}
				if _, err := sb.Kube.CoreV1().ConfigMaps("noise").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range noiseObjects {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
}

// impersonating is a client acting as user, with no client-side rate limit, and a function that names the priority
// level the API server served its last request at (from the X-Kubernetes-PF-PriorityLevel-UID header).
func impersonating(t *testing.T, user string) (kubernetes.Interface, func() string) {
	cfg := rest.CopyConfig(sb.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.QPS, cfg.Burst = -1, 0
	var mu sync.Mutex
	last := ""
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				mu.Lock()
				last = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
				mu.Unlock()
			}
			return resp, err
		})
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	levelOf := func() string {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	return client, levelOf
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// floodRun is what one run under the flood saw.
type floodRun struct {
	withFlowSchemas bool
	lease, bind     latencies
	// levels are the priority levels each kind of Stevedore's requests was served at
	levels      map[string][]string
	errors      int
	firstError  string
	noisyLists  int
	noisyQueued float64
}

type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(l))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// underFlood installs (or removes) the shipped FlowSchemas, waits for the API server to serve Stevedore's lease
// renewals by them (or without them), then floods it with the noisy client's lists while Stevedore renews its lease
// and binds pods, one after the other, rounds times.
func underFlood(ctx context.Context, t *testing.T, stevedore, noisy kubernetes.Interface, levelOf func() string, install bool) *floodRun {
	t.Helper()
	run := &floodRun{withFlowSchemas: install, levels: map[string][]string{}}
	names := flowControl(ctx, t, install)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "stevedore", Namespace: "stevedore"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("stevedore-0"), LeaseDurationSeconds: ptr.To(int32(15))}}
	if _, err := stevedore.CoordinationV1().Leases("stevedore").Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	renew := func(ctx context.Context) error {
		cur, err := stevedore.CoordinationV1().Leases("stevedore").Get(ctx, "stevedore", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = stevedore.CoordinationV1().Leases("stevedore").Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	want := "workload-low"
	if install {
		want = "leader-election"
	}
	harness.Eventually(t, "the API server to serve Stevedore's lease at "+want, func(ctx context.Context) (bool, error) {
		err := renew(ctx)
		return err == nil && names[levelOf()] == want, err
	})
	pods := make([]string, rounds)
	for i := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "bound-", Namespace: "stevedore"},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		created, err := sb.Kube.CoreV1().Pods("stevedore").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = created.Name
	}

	floodCtx, stop := context.WithCancel(ctx)
	var lists atomic.Int64
	var wg sync.WaitGroup
	for range noisyClients {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				if _, err := noisy.CoreV1().ConfigMaps("noise").List(floodCtx, metav1.ListOptions{}); err == nil {
					lists.Add(1)
				}
			}
		})
	}
	waitBefore := queuedLists(ctx, t)
	record := func(what string, err error, took time.Duration, into *latencies) {
		if err != nil {
			run.errors++
			if run.firstError == "" {
				run.firstError = fmt.Sprintf("%s: %v", what, err)
			}
			return
		}
		*into = append(*into, took)
		if level := names[levelOf()]; !slices.Contains(run.levels[what], level) {
			run.levels[what] = append(run.levels[what], level)
		}
	}
	var ignored latencies
	for i := range rounds {
		start := time.Now()
		record("lease renewal", renew(ctx), time.Since(start), &run.lease)
		start = time.Now()
		err := stevedore.CoreV1().Pods("stevedore").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pods[i], Namespace: "stevedore"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "apipriority-node"}}, metav1.CreateOptions{})
		record("bind", err, time.Since(start), &run.bind)
		if i%10 == 0 {
			_, err := stevedore.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			record("list", err, 0, &ignored)
		}
	}
	waitAfter := queuedLists(ctx, t)
	stop()
	wg.Wait()
	run.noisyLists = int(lists.Load())
	if total := waitAfter.total - waitBefore.total; total > 0 {
		run.noisyQueued = (waitAfter.over5ms - waitBefore.over5ms) / total
	}
	for _, name := range pods {
		_ = sb.Kube.CoreV1().Pods("stevedore").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	}
	return run
}

// flowControl creates the shipped FlowSchemas and PriorityLevelConfiguration, or deletes them, and returns the
// names of the priority levels by UID.
func flowControl(ctx context.Context, t *testing.T, install bool) map[string]string {
	t.Helper()
	fc := sb.Kube.FlowcontrolV1()
	for _, doc := range bytes.Split(manifests.FlowControl, []byte("\n---\n")) {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "FlowSchema":
			var fs flowcontrolv1.FlowSchema
			if err := yaml.UnmarshalStrict(doc, &fs); err != nil {
				t.Fatal(err)
			}
			if install {
				_, err := fc.FlowSchemas().Create(ctx, &fs, metav1.CreateOptions{})
				must(t, err)
			} else {
				must(t, ignoreNotFound(fc.FlowSchemas().Delete(ctx, fs.Name, metav1.DeleteOptions{})))
			}
		case "PriorityLevelConfiguration":
			var pl flowcontrolv1.PriorityLevelConfiguration
			if err := yaml.UnmarshalStrict(doc, &pl); err != nil {
				t.Fatal(err)
			}
			if install {
				_, err := fc.PriorityLevelConfigurations().Create(ctx, &pl, metav1.CreateOptions{})
				must(t, err)
			} else {
				must(t, ignoreNotFound(fc.PriorityLevelConfigurations().Delete(ctx, pl.Name, metav1.DeleteOptions{})))
			}
		default:
			t.Fatalf("flowcontrol.yaml holds a %q", head.Kind)
		}
	}
	levels, err := fc.PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, pl := range levels.Items {
		names[string(pl.UID)] = pl.Name
	}
	return names
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// waits are the API server's counts of workload-low requests that were executed, in all and after more than 5 ms
// in a queue (apiserver_flowcontrol_request_wait_duration_seconds).
type waits struct{ total, over5ms float64 }

func queuedLists(ctx context.Context, t *testing.T) waits {
	t.Helper()
	raw, err := sb.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var w waits
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_bucket{") ||
			!strings.Contains(line, `execute="true"`) || !strings.Contains(line, `priority_level="workload-low"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			continue
		}
		switch {
		case strings.Contains(line, `le="+Inf"`):
			w.total += v
			w.over5ms += v
		case strings.Contains(line, `le="0.005"`):
			w.over5ms -= v
		}
	}
	return w
}
