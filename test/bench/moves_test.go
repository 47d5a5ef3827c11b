/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// soloCount is how many single-replica Deployments the moves benchmark runs; fillerNodes how many nodes a filler
// holds them on before consolidation.
const (
	soloCount   = 100
	fillerNodes = 40
)

// BenchmarkMovesOfSingleReplicaDeployments runs 100 single-replica Deployments whose pods take 1 to 10 s to become
// Ready, and moves every one of them, once with replacement Evict and once with Surge (the default), on two
// triggers:
//
//   - consolidation: the Deployments run beside a filler of one 3-CPU pod on each of 40 nodes; the filler is
//     scaled to zero and consolidation packs the 100 pods onto fewer, cheaper nodes;
//   - drift: the Deployments alone, packed by the provisioner; the node class's AMI changes and every node is
//     replaced.
//
// A watch on the pods records every readiness change. It reports the seconds, summed over the Deployments, during
// which a Deployment had no Ready pod, how many Deployments had such a moment, the pods created, the pods evicted
// and surged, the hourly cost saved, and the time until the last node left (with the default plugin arguments:
// validation delay, budgets). Run it with -benchtime 1x.
func BenchmarkMovesOfSingleReplicaDeployments(b *testing.B) {
	for _, trigger := range []string{"consolidation", "drift"} {
		for _, mode := range []stevedorev1.Replacement{stevedorev1.ReplacementEvict, stevedorev1.ReplacementSurge} {
			b.Run(trigger+"/"+string(mode), func(b *testing.B) {
				for range b.N {
					runMoves(b, trigger, mode)
				}
			})
		}
	}
}

func runMoves(b *testing.B, trigger string, mode stevedorev1.Replacement) {
	ctx := context.Background()
	sb, err := sandbox.Start(ctx, sandbox.Options{WithScheduler: true, LaunchDelay: 0})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Stop)
	ns := harness.Namespace(b, sb)
	harness.NodeClass(b, sb)
	np := harness.NewNodePool("bench", "bench", func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.Replacement = mode
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeOnDemand))
	})
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if trigger == "consolidation" {
		filler := harness.Deployment(ns, "filler", fillerNodes, "3", "1Gi")
		filler.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "filler"}}}}}}
		harness.IsolatedDeployment(b, sb, filler, "bench")
		harness.WaitRunning(b, sb, ns, "filler", fillerNodes)
	}
	for i := range soloCount {
		d := harness.Deployment(ns, soloName(i), 1, "250m", "128Mi")
		d.Spec.Template.Labels["group"] = "solo"
		d.Spec.Template.Annotations = map[string]string{sandbox.AnnotationReadyAfter: fmt.Sprintf("%ds", 1+i%10)}
		harness.IsolatedDeployment(b, sb, d, "bench")
	}
	w := watchSolos(b, sb, ns)
	before, beforeCost := fleet(b, sb)
	evictedBefore := harness.Metric(b, "stevedore_termination_pods_evicted_total", nil)
	surgedBefore := harness.Metric(b, "stevedore_disruption_pods_surged_total", map[string]string{"result": "moved"})
	old := map[string]bool{}
	for _, c := range before {
		old[c.Name] = true
	}
	start := time.Now()
	w.start(start)
	if trigger == "consolidation" {
		harness.Scale(b, sb, ns, "filler", 0)
	} else {
		changeAMI(b, sb)
	}
	// finished: none of the first nodes is left (drift), or the fleet's cost has stopped falling for quiet
	// (consolidation), and every Deployment has its Ready pod
	cost, lastChange := beforeCost, start
	var after []stevedorev1.NodeClaim
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Minute, true, func(context.Context) (bool, error) {
		all := harness.NodeClaimsOf(b, sb, "bench")
		live, c := liveAndCost(all)
		if c != cost || len(live) != len(all) {
			cost, lastChange = c, time.Now()
		}
		after = live
		if w.readyDeployments() < soloCount {
			return false, nil
		}
		if trigger == "drift" {
			for _, claim := range all {
				if old[claim.Name] || !claim.IsInitialized() {
					return false, nil
				}
			}
			lastChange = time.Now()
			return true, nil
		}
		return time.Since(lastChange) >= quiet, nil
	})
	if err != nil {
		b.Fatalf("waiting for the moves to finish: %v", err)
	}
	zeroSeconds, atZero, created := w.stop(lastChange)
	evicted := harness.Metric(b, "stevedore_termination_pods_evicted_total", nil) - evictedBefore
	surged := harness.Metric(b, "stevedore_disruption_pods_surged_total", map[string]string{"result": "moved"}) - surgedBefore
	took := lastChange.Sub(start)
	b.ReportMetric(zeroSeconds, "s-at-zero-Ready")
	b.ReportMetric(float64(atZero), "deployments-at-zero")
	b.ReportMetric(float64(created), "pods-created")
	b.ReportMetric(evicted, "pods-evicted")
	b.ReportMetric(surged, "pods-surged")
	b.ReportMetric(beforeCost-cost, "saved-$/h")
	b.ReportMetric(took.Seconds(), "s-to-finish")
	b.Logf("%s with %s: %d nodes ($%.4f/h) -> %d ($%.4f/h) in %s; %d of %d Deployments had no Ready pod for %.1f s in all; %d pods created, %.0f evicted, %.0f surged",
		trigger, mode, len(before), beforeCost, len(after), cost, took.Round(time.Second), atZero, soloCount, zeroSeconds, created, evicted, surged)
}

func soloName(i int) string { return fmt.Sprintf("solo-%03d", i) }

// changeAMI points the default node class at a new AMI (one per architecture): every node drifts.
func changeAMI(b *testing.B, sb *sandbox.Sandbox) {
	var terms []stevedorev1.AMISelectorTerm
	for _, arch := range []string{"amd64", "arm64"} {
		terms = append(terms, stevedorev1.AMISelectorTerm{ID: sb.AWS.AddImage("al2023-eks-next-"+arch, arch, map[string]string{"release": "next"})})
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(context.Background(), "default", metav1.GetOptions{})
		if err != nil {
			return err
		}
		family := stevedorev1.AMIFamilyAL2023
		cur.Spec.AMIFamily = &family
		cur.Spec.AMISelectorTerms = terms
		_, err = sb.Stevedore.StevedoreV1().EC2NodeClasses().Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// soloWatch follows the Ready pods of each single-replica Deployment, and counts the seconds each spends with
// none, and the pods created, from start on.
type soloWatch struct {
	mu       sync.Mutex
	ready    map[string]map[string]bool // app -> Ready pods
	zeroFrom map[string]time.Time       // app -> when it lost its last Ready pod
	zero     time.Duration
	atZero   map[string]bool
	seen     map[string]bool // pods seen before start
	created  int
	started  bool
	w        watch.Interface
}

// watchSolos waits until every Deployment has its pod Ready, then watches from there.
func watchSolos(b *testing.B, sb *sandbox.Sandbox, ns string) *soloWatch {
	s := &soloWatch{ready: map[string]map[string]bool{}, zeroFrom: map[string]time.Time{}, atZero: map[string]bool{}, seen: map[string]bool{}}
	var since string
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "group=solo"})
		if err != nil {
			return false, err
		}
		clear(s.ready)
		clear(s.seen)
		for i := range pods.Items {
			p := &pods.Items[i]
			s.seen[p.Name] = true
			if podutil.Ready(p) {
				s.add(p)
			}
		}
		since = pods.ResourceVersion
		return len(s.ready) == soloCount, nil
	})
	if err != nil {
		b.Fatalf("waiting for every single-replica Deployment to be Ready: %v", err)
	}
	s.w, err = sb.Kube.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "group=solo", ResourceVersion: since})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.w.Stop)
	go func() {
		for ev := range s.w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if ok {
				s.observe(ev.Type, pod, time.Now())
			}
		}
	}()
	return s
}

func (s *soloWatch) add(p *corev1.Pod) {
	app := p.Labels["app"]
	if s.ready[app] == nil {
		s.ready[app] = map[string]bool{}
	}
	s.ready[app][p.Name] = true
}

func (s *soloWatch) observe(typ watch.EventType, p *corev1.Pod, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	app := p.Labels["app"]
	if s.started && typ == watch.Added && !s.seen[p.Name] {
		s.created++
	}
	s.seen[p.Name] = true
	if typ != watch.Deleted && p.DeletionTimestamp == nil && podutil.Ready(p) {
		s.add(p)
	} else {
		delete(s.ready[app], p.Name)
	}
	switch from, zero := s.zeroFrom[app]; {
	case len(s.ready[app]) == 0 && !zero:
		s.zeroFrom[app] = now
	case len(s.ready[app]) > 0 && zero:
		delete(s.zeroFrom, app)
		if s.started {
			s.zero += now.Sub(from)
			s.atZero[app] = true
		}
	}
}

// start begins the count at t.
func (s *soloWatch) start(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	for app := range s.zeroFrom {
		s.zeroFrom[app] = t
	}
}

// readyDeployments counts the Deployments with a Ready pod.
func (s *soloWatch) readyDeployments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, pods := range s.ready {
		if len(pods) > 0 {
			n++
		}
	}
	return n
}

// stop ends the count at end: the seconds summed over Deployments without a Ready pod (those still without one
// count until end), how many had such a moment, and the pods created.
func (s *soloWatch) stop(end time.Time) (float64, int, int) {
	s.w.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	zero := s.zero
	for app, from := range s.zeroFrom {
		if end.After(from) {
			zero += end.Sub(from)
		}
		s.atZero[app] = true
	}
	return zero.Seconds(), len(s.atZero), s.created
}
