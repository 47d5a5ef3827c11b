/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// BenchmarkChurn20 scales a Deployment of 1-CPU pods between 30 and 10 replicas 20 times, each time as soon as
// the replicas run, with the default plugin arguments, then lets the fleet settle, and counts the NodeClaims
// launched and terminated (thrash: launches beyond the 30 pods' first scale-out) and the pods evicted. Run with
// -benchtime 1x.
func BenchmarkChurn20(b *testing.B) {
	for i := 0; i < b.N; i++ {
		churn(b)
	}
}

func churn(b *testing.B) {
	ctx := context.Background()
	sb := startSandbox(b, true)
	ns := harness.Namespace(b, sb)
	harness.NodePool(b, sb, "churn", "churn")
	created, terminated := countClaims(b, sb, "churn")
	harness.IsolatedDeployment(b, sb, harness.Deployment(ns, "churn", 30, "1", "1Gi"), "churn")
	harness.WaitRunning(b, sb, ns, "churn", 30)
	firstLaunch := created()
	start := time.Now()
	for i := 0; i < 20; i++ {
		replicas := int32(10)
		if i%2 == 1 {
			replicas = 30
		}
		harness.Scale(b, sb, ns, "churn", replicas)
		harness.WaitRunning(b, sb, ns, "churn", int(replicas))
	}
	// settle: nothing deleting and the same fleet for quiet
	var since time.Time
	last := -1
	harness.EventuallyWithin(b, 20*time.Minute, "the fleet to settle", func(ctx context.Context) (bool, error) {
		all := harness.NodeClaimsOf(b, sb, "churn")
		live := len(harness.LiveNodeClaimsOf(b, sb, "churn"))
		if live != last || live != len(all) {
			last, since = live, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
	took := time.Since(start)
	evictions := 0
	events, err := sb.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Reason == "Evicted" {
			evictions++
		}
	}
	launched, gone := created(), terminated()
	b.ReportMetric(float64(launched), "nodeclaims-launched")
	b.ReportMetric(float64(launched-firstLaunch), "launched-after-first-scale-out")
	b.ReportMetric(float64(gone), "nodeclaims-terminated")
	b.ReportMetric(float64(evictions), "pods-evicted")
	b.Logf("20 scale changes 30<->10 of 1-CPU pods in %s: %d NodeClaims launched (%d for the first 30 pods, %d after), %d terminated, %d live at the end, %d pods evicted",
		took.Round(time.Second), launched, firstLaunch, launched-firstLaunch, gone, last, evictions)
}

// countClaims watches a NodePool's NodeClaims and returns counters of those created and deleted since.
func countClaims(b *testing.B, sb *sandbox.Sandbox, pool string) (created, deleted func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	sel := labels.SelectorFromSet(labels.Set{stevedorev1.LabelNodePool: pool}).String()
	w, err := sb.Stevedore.StevedoreV1().NodeClaims().Watch(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var added, removed int
	go func() {
		for ev := range w.ResultChan() {
			mu.Lock()
			switch ev.Type {
			case watch.Added:
				added++
			case watch.Deleted:
				removed++
			}
			mu.Unlock()
		}
	}()
	b.Cleanup(w.Stop)
	return func() int {
			mu.Lock()
			defer mu.Unlock()
			return added
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return removed
		}
}
