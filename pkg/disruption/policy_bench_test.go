/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// policyBenchTypes are the instance types of the policy benchmark's NodePool.
var policyBenchTypes = []string{"c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge", "m5.large", "m5.xlarge", "m5.2xlarge",
	"m5.4xlarge", "r5.large", "r5.xlarge", "r5.2xlarge", "r5.4xlarge"}

// podSize is a Deployment's pod requests.
type podSize struct{ cpu, mem string }

// policyBenchSizes are the five Deployments of the benchmark (Karpenter's and the sandbox benchmark's mix).
var policyBenchSizes = []podSize{{"100m", "128Mi"}, {"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}}

// BenchmarkConsolidationPolicies runs the disruption passes of the live loop over a cluster kept in memory (every
// command applied at once: its nodes removed, its replacement added, its pods placed where the simulation put
// them) until a pass finds nothing to do, for each consolidation policy, on two workloads:
//
//   - scale-in: 1000 pods of five sizes provisioned by the solver, then 300 of them deleted (every Deployment
//     from 200 to 140 replicas);
//   - drift: 700 pods provisioned, then ten rounds in which a tenth of the pods are replaced by pods of a size
//     one step along the mix (a rollout changing requests), the new pods provisioned onto the nodes with room or
//     new nodes, and consolidation run to its fixed point after each round.
//
// It reports the pods evicted, the hourly cost saved (the fleet's cost before consolidation minus after, summed
// over rounds), evictions per dollar-per-hour saved, the final cost, and the commands carried out.
func BenchmarkConsolidationPolicies(b *testing.B) {
	for _, workload := range []string{"scale-in", "drift"} {
		for _, policy := range []stevedorev1.ConsolidationPolicy{stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, "Balanced"} {
			b.Run(workload+"/"+string(policy), func(b *testing.B) {
				for range b.N {
					var r policyRun
					if workload == "scale-in" {
						r = scaleIn(b, policy)
					} else {
						r = driftSizes(b, policy)
					}
					b.ReportMetric(float64(r.evicted), "pods-evicted")
					b.ReportMetric(r.saved, "saved-$/h")
					if r.saved > 0 {
						b.ReportMetric(float64(r.evicted)/r.saved, "evictions-per-$/h")
					}
					b.ReportMetric(r.final, "final-$/h")
					b.ReportMetric(float64(r.commands), "commands")
				}
			})
		}
	}
}

type policyRun struct {
	evicted, commands int
	saved, final      float64
}

// benchCluster is the in-memory cluster of the benchmark: a harness whose listers are edited as commands apply.
type benchCluster struct {
	b      *testing.B
	h      *harness
	pool   *stevedorev1.NodePool
	nodes  map[string]bool
	pods   map[string]*corev1.Pod // bound pods, by name
	serial int
}

func newBenchCluster(b *testing.B, policy stevedorev1.ConsolidationPolicy) *benchCluster {
	np := test.NodePool("bench").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, policyBenchTypes...).
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).
		Require(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, testZone).
		Consolidation(policy, dur(0)).Budgets(budget("100%", "", 0)).Obj()
	h := newHarness(b, harnessConfig{types: policyBenchTypes}, np)
	return &benchCluster{b: b, h: h, pool: np, nodes: map[string]bool{}, pods: map[string]*corev1.Pod{}}
}

// podOf is the name-th pod of a size.
func (c *benchCluster) podOf(size int) *corev1.Pod {
	c.serial++
	s := policyBenchSizes[size%len(policyBenchSizes)]
	app := fmt.Sprintf("app-%d", size%len(policyBenchSizes))
	p := test.Pod(fmt.Sprintf("%s-%05d", app, c.serial)).Req("cpu", s.cpu, "memory", s.mem).OwnedBy("ReplicaSet", "rs-"+app).
		Labels("app", app).Obj()
	p.UID = types.UID("pod-" + p.Name)
	return p
}

// provision places pending pods as the provisioner would: onto the nodes with room, then onto new nodes.
func (c *benchCluster) provision(pending []*corev1.Pod) {
	objs := []runtime.Object{c.pool.DeepCopy()}
	nodes, err := c.h.Listers.Nodes.List(labels.Everything())
	if err != nil {
		c.b.Fatal(err)
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	for _, p := range c.pods {
		objs = append(objs, p)
	}
	for _, p := range pending {
		objs = append(objs, p)
	}
	problem, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
	if err != nil {
		c.b.Fatal(err)
	}
	sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		c.b.Fatal(err)
	}
	plan, err := solver.NewSolver(sim).Solve(context.Background(), problem.Input(0))
	if err != nil {
		c.b.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		c.b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
	}
	for node, pods := range plan.InFlight {
		c.bind(node, pods)
	}
	for _, n := range plan.NewNodes {
		c.bind(c.launch(n.InstanceType.Name), n.Pods)
	}
}

// launch adds an initialized node of the type and returns its name.
func (c *benchCluster) launch(typ string) string {
	c.serial++
	name := fmt.Sprintf("node-%05d", c.serial)
	for _, o := range (machine{name: name, pool: "bench", typ: typ, created: t0.Add(-time.Hour)}).objs() {
		if err := c.h.Listers.Add(o); err != nil {
			c.b.Fatal(err)
		}
	}
	c.nodes[name] = true
	return name
}

func (c *benchCluster) bind(node string, pods []*corev1.Pod) {
	for _, p := range pods {
		p = p.DeepCopy()
		p.Spec.NodeName = node
		c.pods[p.Name] = p
		if err := c.h.Listers.Add(p); err != nil {
			c.b.Fatal(err)
		}
	}
}

func (c *benchCluster) deletePod(p *corev1.Pod) {
	delete(c.pods, p.Name)
	if err := c.h.Listers.Delete(p); err != nil {
		c.b.Fatal(err)
	}
}

// cost is the fleet's hourly price.
func (c *benchCluster) cost() float64 {
	claims, err := c.h.Listers.NodeClaims.List(labels.Everything())
	if err != nil {
		c.b.Fatal(err)
	}
	total := 0.0
	for _, cl := range claims {
		p, _ := strconv.ParseFloat(cl.Status.Price, 64)
		total += p
	}
	return total
}

// consolidate runs passes until one finds nothing, applying each command; it returns the pods evicted and the
// commands carried out.
func (c *benchCluster) consolidate() (evicted, commands int) {
	return c.consolidateWatched(nil)
}

// passStats is what one pass did: the candidates it had, those it judged (a verdict or the command's), the
// removals it simulated, how long it took, and the nodes of the command it found (none at the fixed point).
type passStats struct {
	candidates, judged, simulations int
	took                            time.Duration
	command                         []string
}

// consolidateWatched is consolidate, handing each pass's stats to watch (when not nil).
func (c *benchCluster) consolidateWatched(watch func(passStats)) (evicted, commands int) {
	ctx := context.Background()
	for range 1000 {
		c.h.c.removals.reset()
		start, simulated := time.Now(), c.h.c.removals.simulations()
		v, err := c.h.c.view(ctx)
		if err != nil {
			c.b.Fatal(err)
		}
		var cmd *Command
		for _, m := range c.h.c.methods {
			if cmd, err = m.Find(ctx, v); err != nil {
				c.b.Fatal(err)
			}
			if cmd != nil {
				break
			}
		}
		if watch != nil {
			st := passStats{candidates: len(v.candidates), judged: len(v.verdicts), simulations: c.h.c.removals.simulations() - simulated,
				took: time.Since(start)}
			if cmd != nil {
				st.command = sortedNames(cmd.Candidates)
				for _, cand := range cmd.Candidates {
					if v.verdicts[cand.Node.Name] == nil {
						st.judged++
					}
				}
			}
			watch(st)
		}
		if cmd == nil {
			return evicted, commands
		}
		r, err := c.h.c.removals.simulate(ctx, cmd.Candidates)
		if err != nil {
			c.b.Fatal(err)
		}
		for _, cand := range cmd.Candidates {
			for _, p := range cand.Pods {
				c.deletePod(p)
			}
			if err := c.h.Listers.Delete(cand.Node); err != nil {
				c.b.Fatal(err)
			}
			if err := c.h.Listers.Delete(cand.NodeClaim); err != nil {
				c.b.Fatal(err)
			}
			delete(c.nodes, cand.Node.Name)
		}
		for node, pods := range r.Plan.InFlight {
			c.bind(node, pods)
		}
		if len(cmd.Replacements) == 1 && len(r.Plan.NewNodes) == 1 {
			c.bind(c.launch(cmd.Replacements[0].InstanceType.Name), r.Plan.NewNodes[0].Pods)
		}
		evicted += len(r.Pods)
		commands++
	}
	c.b.Fatal("consolidation did not reach a fixed point in 1000 commands")
	return evicted, commands
}

func scaleIn(b *testing.B, policy stevedorev1.ConsolidationPolicy) policyRun {
	c := newBenchCluster(b, policy)
	var pods []*corev1.Pod
	for i := range 1000 {
		pods = append(pods, c.podOf(i))
	}
	c.provision(pods)
	// every Deployment from 200 to 140 replicas: three pods of every ten
	for i, p := range pods {
		if i%10 < 3 {
			c.deletePod(c.pods[p.Name])
		}
	}
	before := c.cost()
	b.ResetTimer()
	evicted, commands := c.consolidate()
	after := c.cost()
	return policyRun{evicted: evicted, commands: commands, saved: before - after, final: after}
}

func driftSizes(b *testing.B, policy stevedorev1.ConsolidationPolicy) policyRun {
	c := newBenchCluster(b, policy)
	var pods []*corev1.Pod
	for i := range 700 {
		pods = append(pods, c.podOf(i))
	}
	c.provision(pods)
	c.consolidate() // the starting point: a consolidated fleet
	run := policyRun{}
	b.ResetTimer()
	for round := range 10 {
		var fresh []*corev1.Pod
		for i, p := range pods {
			if i%10 != round || c.pods[p.Name] == nil {
				continue
			}
			c.deletePod(c.pods[p.Name])
			fresh = append(fresh, c.podOf(i+1+round)) // one step along the mix
		}
		pods = append(pods, fresh...)
		c.provision(fresh)
		before := c.cost()
		e, n := c.consolidate()
		run.evicted += e
		run.commands += n
		run.saved += before - c.cost()
	}
	run.final = c.cost()
	return run
}

// passBenchShapes are the pods of the pass benchmark's nodes, one shape per node in turn: 20 pods each, which
// leave an m5.xlarge half, three quarters and nine tenths used.
var passBenchShapes = []podSize{{"100m", "256Mi"}, {"150m", "384Mi"}, {"180m", "512Mi"}}

// BenchmarkConsolidationPassAt1000Nodes measures consolidation on a large cluster kept in memory: 1,000
// m5.xlarge nodes of 20 pods each (20,000 pods), half, three quarters or nine tenths used. It reports the first
// pass (its time, the candidates it judged, the removals it simulated, the nodes of the move it found), then runs
// passes to the fixed point, applying each move, and reports the passes, the slowest, the nodes removed and
// whether the last pass judged every candidate left (none starved).
func BenchmarkConsolidationPassAt1000Nodes(b *testing.B) {
	for range b.N {
		c := newBenchCluster(b, stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized)
		for i := range 1000 {
			node := c.launch("m5.xlarge")
			shape := passBenchShapes[i%len(passBenchShapes)]
			var pods []*corev1.Pod
			for range 20 {
				c.serial++
				app := fmt.Sprintf("app-%d", i%len(passBenchShapes))
				p := test.Pod(fmt.Sprintf("%s-%05d", app, c.serial)).Req("cpu", shape.cpu, "memory", shape.mem).
					OwnedBy("ReplicaSet", "rs-"+app).Labels("app", app).Obj()
				p.UID = types.UID("pod-" + p.Name)
				pods = append(pods, p)
			}
			c.bind(node, pods)
		}
		before, nodesBefore := c.cost(), len(c.nodes)
		b.ResetTimer()
		var passes []passStats
		c.consolidateWatched(func(st passStats) { passes = append(passes, st) })
		b.StopTimer()
		first, last := passes[0], passes[len(passes)-1]
		slowest, moved := time.Duration(0), 0
		for _, p := range passes {
			slowest = max(slowest, p.took)
			moved += len(p.command)
		}
		b.ReportMetric(first.took.Seconds(), "first-pass-s")
		b.ReportMetric(float64(first.judged), "first-pass-judged")
		b.ReportMetric(float64(first.simulations), "first-pass-simulations")
		b.ReportMetric(float64(len(first.command)), "first-move-nodes")
		b.ReportMetric(float64(len(passes)), "passes")
		b.ReportMetric(slowest.Seconds(), "slowest-pass-s")
		b.ReportMetric(last.took.Seconds(), "last-pass-s")
		b.ReportMetric(float64(last.judged), "last-pass-judged")
		b.ReportMetric(float64(nodesBefore-len(c.nodes)), "nodes-removed")
		b.ReportMetric(before-c.cost(), "saved-$/h")
		if last.judged != last.candidates {
			b.Errorf("the last pass judged %d of its %d candidates", last.judged, last.candidates)
		}
		b.Logf("1000 nodes, 20000 pods: first pass %s, %d of %d candidates judged, %d removals simulated, a move of %d nodes; "+
			"%d passes to the fixed point (slowest %s), %d nodes to %d ($%.2f/h to $%.2f/h); the last pass judged %d of %d candidates in %s",
			first.took.Round(time.Millisecond), first.judged, first.candidates, first.simulations, len(first.command), len(passes),
			slowest.Round(time.Millisecond), nodesBefore, len(c.nodes), before, c.cost(), last.judged, last.candidates, last.took.Round(time.Millisecond))
	}
}
