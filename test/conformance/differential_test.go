/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package conformance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

const (
	// randomCases are generated; at least minDecided must be settled by the exhaustive search within its budget.
	randomCases = 260
	minDecided  = 200
	// searchBudget bounds the exhaustive search of one case, in search steps.
	searchBudget = 100000
)

// TestSolverAgainstExhaustiveSearch generates small random workloads (at most 8 pods; node selectors, node
// affinity, required pod affinity and anti-affinity on hostname, zone, arch and capacity type, hard spreads,
// preferences, taints and tolerations, DaemonSets, two NodePools) and compares the solver with an exhaustive
// search over every way to put the pods on nodes the NodePools can launch: the solver must leave no more pods
// unschedulable than the search can place, and every placement must pass the scheduler's Filter plugins with all
// the other planned pods present. In the search, as in the solver, every zone and capacity type a NodePool can
// launch into is a topology spread domain even with no node there (the search's phantom nodes).
// STEVEDORE_RANDOM_SEED replays another sequence.
func TestSolverAgainstExhaustiveSearch(t *testing.T) {
	seed := uint64(20261126)
	if v := os.Getenv("STEVEDORE_RANDOM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STEVEDORE_RANDOM_SEED: %v", err)
		}
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	decided, undecided, stranded := 0, 0, 0
	for i := 0; i < randomCases; i++ {
		c := generate(rng, i)
		t.Run(fmt.Sprintf("case-%03d", i), func(t *testing.T) {
			ok, placeable := compareWithSearch(t, c)
			if !ok {
				undecided++
				return
			}
			decided++
			if placeable < len(c.pods) {
				stranded++
			}
		})
	}
	t.Logf("seed %d: %d random cases, %d decided by the exhaustive search (%d where not every pod can be placed), %d beyond its budget",
		seed, randomCases, decided, stranded, undecided)
	if decided < minDecided {
		t.Errorf("only %d cases decided, want at least %d", decided, minDecided)
	}
}

// randomCase is one generated workload.
type randomCase struct {
	catalog *catalog.File
	objects []runtime.Object
	pods    []*corev1.Pod
	summary []string
}

func generate(rng *rand.Rand, index int) *randomCase {
	c := &randomCase{catalog: randomCatalog()}
	zones := []string{"us-east-1a", "us-east-1b"}
	general := &stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}, Spec: stevedorev1.NodePoolSpec{Weight: ptr(int32(10)),
		Template: stevedorev1.NodeClaimTemplate{Spec: stevedorev1.NodeClaimTemplateSpec{NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"}}}}}
	c.objects = append(c.objects, general)
	special := rng.IntN(2) == 0
	tainted := special && rng.IntN(2) == 0
	if special {
		np := &stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "special"}, Spec: stevedorev1.NodePoolSpec{Weight: ptr(int32(5)),
			Template: stevedorev1.NodeClaimTemplate{ObjectMeta: stevedorev1.TemplateObjectMeta{Labels: map[string]string{"tier": "special"}},
				Spec: stevedorev1.NodeClaimTemplateSpec{NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"}}}}}
		if tainted {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "special", Effect: corev1.TaintEffectNoSchedule}}
			c.summary = append(c.summary, "special pool (tainted)")
		} else {
			np.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{{Key: stevedorev1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}}}
			c.summary = append(c.summary, "special pool (on-demand)")
		}
		c.objects = append(c.objects, np)
	}
	for d := 0; d < rng.IntN(3); d++ {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%d", d), Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"agent": strconv.Itoa(d)}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse([]string{"250m", "500m", "1"}[rng.IntN(3)])}}}}}}}}
		switch rng.IntN(3) {
		case 0:
			ds.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: []string{"amd64", "arm64"}[rng.IntN(2)]}
		case 1:
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"special"}}}}}}}}
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		c.summary = append(c.summary, fmt.Sprintf("daemonset %s %s sel=%v", ds.Name, ds.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu(), ds.Spec.Template.Spec.NodeSelector))
		c.objects = append(c.objects, ds)
	}
	n := 1 + rng.IntN(8)
	apps := []string{"a", "b", "c"}
	keys := []string{corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelArchStable, stevedorev1.LabelCapacityType}
	for i := 0; i < n; i++ {
		app := apps[rng.IntN(len(apps))]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("case%d-p%d", index, i)),
			Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse([]string{"500m", "1", "1500m", "2", "3"}[rng.IntN(5)])}}}}}}
		var what []string
		sel := map[string]string{}
		if rng.IntN(5) == 0 {
			sel[corev1.LabelArchStable] = []string{"amd64", "arm64"}[rng.IntN(2)]
		}
		if rng.IntN(10) == 0 {
			sel[corev1.LabelTopologyZone] = zones[rng.IntN(2)]
		}
		if rng.IntN(10) == 0 {
			sel[stevedorev1.LabelCapacityType] = "on-demand"
		}
		if special && rng.IntN(6) == 0 {
			sel["tier"] = "special"
		}
		if len(sel) > 0 {
			p.Spec.NodeSelector = sel
			what = append(what, fmt.Sprintf("nodeSelector=%v", sel))
		}
		if tainted && rng.IntN(3) == 0 {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "special", Effect: corev1.TaintEffectNoSchedule}}
			what = append(what, "tolerates dedicated")
		}
		aff := &corev1.Affinity{}
		if rng.IntN(10) == 0 {
			key := []string{corev1.LabelArchStable, corev1.LabelTopologyZone}[rng.IntN(2)]
			value := map[string][]string{corev1.LabelArchStable: {"amd64", "arm64"}, corev1.LabelTopologyZone: zones}[key][rng.IntN(2)]
			aff.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: []string{value}}}}}}}
			what = append(what, fmt.Sprintf("affinity %s NotIn %s", key, value))
		}
		if rng.IntN(5) == 0 {
			target, key := apps[rng.IntN(len(apps))], keys[rng.IntN(len(keys))]
			aff.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": target}}, TopologyKey: key}}}
			what = append(what, fmt.Sprintf("anti-affinity app=%s on %s", target, key))
		}
		if rng.IntN(7) == 0 {
			target, key := apps[rng.IntN(len(apps))], keys[rng.IntN(2)]
			aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": target}}, TopologyKey: key}}}
			what = append(what, fmt.Sprintf("affinity app=%s on %s", target, key))
		}
		if rng.IntN(6) == 0 {
			term := corev1.WeightedPodAffinityTerm{Weight: 1 + rng.Int32N(100), PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[rng.IntN(len(apps))]}}, TopologyKey: keys[rng.IntN(len(keys))]}}
			if rng.IntN(2) == 0 {
				if aff.PodAffinity == nil {
					aff.PodAffinity = &corev1.PodAffinity{}
				}
				aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{term}
				what = append(what, "preferred affinity")
			} else {
				if aff.PodAntiAffinity == nil {
					aff.PodAntiAffinity = &corev1.PodAntiAffinity{}
				}
				aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{term}
				what = append(what, "preferred anti-affinity")
			}
		}
		if rng.IntN(8) == 0 {
			if aff.NodeAffinity == nil {
				aff.NodeAffinity = &corev1.NodeAffinity{}
			}
			aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zones[rng.IntN(2)]}}}}}}
			what = append(what, "preferred zone")
		}
		if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
			p.Spec.Affinity = aff
		}
		if rng.IntN(6) == 0 {
			key := keys[rng.IntN(2)]
			skew := 1 + rng.Int32N(2)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: skew, TopologyKey: key,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			what = append(what, fmt.Sprintf("spread %s maxSkew %d", key, skew))
		}
		c.summary = append(c.summary, fmt.Sprintf("%s app=%s cpu=%s %s", p.Name, app, p.Spec.Containers[0].Resources.Requests.Cpu(), strings.Join(what, "; ")))
		c.pods = append(c.pods, p)
		c.objects = append(c.objects, p)
	}
	return c
}

// randomCatalog has a small and a large type of each architecture, in two zones, spot and on-demand, with no
// overhead so that capacities are round.
func randomCatalog() *catalog.File {
	zero := 0.0
	var its []catalog.InstanceType
	for _, arch := range []string{"amd64", "arm64"} {
		for _, size := range []struct {
			name        string
			cpu, pods   int
			spot, onDem float64
		}{{"small", 2, 4, 0.02, 0.05}, {"large", 4, 8, 0.04, 0.1}} {
			it := catalog.InstanceType{Name: arch + "." + size.name, Architecture: arch, VCPU: size.cpu, MemoryMiB: int64(size.cpu) * 4096,
				MaxPods: size.pods, Overhead: &catalog.Overhead{CPU: "0", Memory: "0", VMMemoryPercent: &zero}}
			discount := 1.0
			if arch == "arm64" {
				discount = 0.8
			}
			for z, zone := range []string{"us-east-1a", "us-east-1b"} {
				it.Offerings = append(it.Offerings,
					catalog.Offering{Zone: zone, CapacityType: "spot", Price: size.spot * discount * (1 + 0.1*float64(z))},
					catalog.Offering{Zone: zone, CapacityType: "on-demand", Price: size.onDem * discount})
			}
			its = append(its, it)
		}
	}
	return &catalog.File{Region: "us-east-1", InstanceTypes: its}
}

// compareWithSearch solves the case and searches exhaustively; it reports whether the search decided the case
// and how many pods it can place.
func compareWithSearch(t *testing.T, c *randomCase) (bool, int) {
	ctx := context.Background()
	problem, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: c.objects, Catalog: c.catalog, VMMemoryOverheadPercent: 7.5})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := solver.NewSolver(sim).Solve(ctx, problem.Input(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	describe := func() string {
		var b strings.Builder
		b.WriteString("case:\n  " + strings.Join(c.summary, "\n  ") + "\nplan:\n")
		for i, n := range plan.NewNodes {
			var pods []string
			for _, p := range n.Pods {
				pods = append(pods, p.Name)
			}
			sort.Strings(pods)
			fmt.Fprintf(&b, "  node %d %s %s %s %s %v\n", i+1, n.NodePool.Name, n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, pods)
		}
		for _, p := range c.pods {
			if r, ok := plan.Unschedulable[p.UID]; ok {
				fmt.Fprintf(&b, "  unschedulable %s: %s\n", p.Name, r)
			}
		}
		return b.String()
	}
	for _, v := range solver.Verify(ctx, sim, nil, problem.Region, plan, problem.DaemonSets) {
		t.Errorf("the scheduler would refuse: %s\n%s", v, describe())
	}
	s := newSearch(ctx, t, problem, sim)
	s.summary = "case:\n  " + strings.Join(c.summary, "\n  ")
	decided, best, witness := s.run()
	if !decided {
		return false, 0
	}
	if got := len(c.pods) - len(plan.Unschedulable); got < best {
		t.Errorf("the solver places %d of %d pods, the exhaustive search %d: %s\n%s", got, len(c.pods), best, witness, describe())
	}
	return true, best
}

// search places pods on nodes of every kind the NodePools can launch, every way, to find the most pods that can
// be placed together. Node kinds that no pod or DaemonSet could tell apart are merged, keeping the roomiest.
type search struct {
	ctx      context.Context
	t        *testing.T
	sim      *simulation.Simulator
	snap     *simulation.Snapshot
	pods     []*corev1.Pod
	kinds    []nodeKind
	open     []*openNode
	steps    int
	best     int
	witness  string
	complete bool
	// rejections counts the quick check's refusals.
	rejections int
	// phantoms stand for the topology domains new nodes could open.
	phantoms []*corev1.Node
	summary  string
}

type nodeKind struct {
	node    *corev1.Node
	daemons []*corev1.Pod
	room    resource.Quantity // cpu left after the DaemonSets
	pods    int64
	label   string
}

type openNode struct {
	kind *nodeKind
	name string
	used resource.Quantity
	pods []*corev1.Pod
}

func newSearch(ctx context.Context, t *testing.T, problem *solver.OfflineProblem, sim *simulation.Simulator) *search {
	s := &search{ctx: ctx, t: t, sim: sim, snap: simulation.NewSnapshot(), pods: problem.Pods}
	relevant := map[string]bool{stevedorev1.LabelNodePool: true}
	for _, p := range append(append([]*corev1.Pod(nil), problem.Pods...), problem.DaemonSets...) {
		for k := range p.Spec.NodeSelector {
			relevant[k] = true
		}
		if a := p.Spec.Affinity; a != nil {
			if a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					for _, e := range term.MatchExpressions {
						relevant[e.Key] = true
					}
				}
			}
			if a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					relevant[term.TopologyKey] = true
				}
			}
			if a.PodAntiAffinity != nil {
				for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					relevant[term.TopologyKey] = true
				}
			}
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == corev1.DoNotSchedule {
				relevant[c.TopologyKey] = true
			}
		}
	}
	byLabel := map[string]int{}
	for i := range problem.NodePools {
		pool := &problem.NodePools[i]
		for _, it := range pool.InstanceTypes {
			for _, o := range it.Offerings.Compatible(pool.Requirements) {
				pn := &solver.PlannedNode{NodePool: pool.NodePool, PoolRequirements: pool.Requirements, Requirements: pool.Requirements,
					InstanceType: it, Offering: o}
				node := solver.NodeForPlan("kind", problem.Region, pn)
				daemons := solver.DaemonSetsOn(ctx, sim, problem.DaemonSets, node)
				alloc := it.Allocatable()
				room := alloc.Cpu().DeepCopy()
				for _, d := range daemons {
					room.Sub(*d.Spec.Containers[0].Resources.Requests.Cpu())
				}
				if room.Sign() < 0 {
					continue
				}
				var parts []string
				for _, k := range sortedKeys(node.Labels) {
					if relevant[k] && k != corev1.LabelHostname {
						parts = append(parts, k+"="+node.Labels[k])
					}
				}
				label := strings.Join(parts, ",")
				kind := nodeKind{node: node, daemons: daemons, room: room, pods: alloc.Pods().Value() - int64(len(daemons)), label: label}
				if j, ok := byLabel[label]; ok {
					if room.Cmp(s.kinds[j].room) > 0 {
						s.kinds[j] = kind
					}
					continue
				}
				byLabel[label] = len(s.kinds)
				s.kinds = append(s.kinds, kind)
			}
		}
	}
	return s
}

func (s *search) run() (bool, int, string) {
	// Every kind of node the NodePools can launch is a possible topology domain, as the solver (and Karpenter)
	// count them: a zone-less node goes wherever EC2 has capacity, so no plan can count on a zone staying empty.
	// Each kind gets a phantom node: its labels, no hostname, no room.
	for i, k := range s.kinds {
		phantom := k.node.DeepCopy()
		phantom.Name = fmt.Sprintf("phantom-%d", i)
		delete(phantom.Labels, corev1.LabelHostname)
		phantom.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("0")}
		s.snap.AddNode(phantom)
		s.phantoms = append(s.phantoms, phantom)
	}
	previous := s.sim.Snapshot()
	s.sim.Use(s.snap)
	defer s.sim.Use(previous)
	s.complete = true
	s.step(0, 0)
	return s.complete || s.best == len(s.pods), s.best, s.witness
}

// allowed is a quick necessary check of placing pod on n with the pods placed so far: room, node selector and
// required node affinity, taints, and required anti-affinity both ways. Each only fails more as pods are added,
// so a failure prunes the whole branch; the Filter plugins decide at the end.
func (s *search) allowed(pod *corev1.Pod, n *openNode, cpu resource.Quantity) bool {
	total := n.used.DeepCopy()
	total.Add(cpu)
	if total.Cmp(n.kind.room) > 0 || int64(len(n.pods)+1) > n.kind.pods {
		return false
	}
	node := s.snap.NodeInfo(n.name).Node()
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	for _, m := range s.open {
		other := s.snap.NodeInfo(m.name).Node()
		for _, q := range m.pods {
			if repels(pod, q, node, other) || repels(q, pod, other, node) {
				return false
			}
		}
	}
	return true
}

// repels reports whether a's required anti-affinity keeps it from b's topology domain.
func repels(a, b *corev1.Pod, aNode, bNode *corev1.Node) bool {
	if a.Spec.Affinity == nil || a.Spec.Affinity.PodAntiAffinity == nil || a.Namespace != b.Namespace {
		return false
	}
	for _, term := range a.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(b.Labels)) {
			continue
		}
		va, oka := aNode.Labels[term.TopologyKey]
		vb, okb := bNode.Labels[term.TopologyKey]
		if oka && okb && va == vb {
			return true
		}
	}
	return false
}

func (s *search) step(i, placed int) {
	if s.best == len(s.pods) {
		return
	}
	s.steps++
	if s.steps > searchBudget {
		s.complete = false
		return
	}
	if placed+(len(s.pods)-i) <= s.best {
		return
	}
	if i == len(s.pods) {
		if s.valid() {
			s.best = placed
			s.witness = s.describe()
		}
		return
	}
	pod := s.pods[i]
	cpu := *pod.Spec.Containers[0].Resources.Requests.Cpu()
	for _, n := range s.open {
		if !s.allowed(pod, n, cpu) {
			continue
		}
		s.add(n, pod, cpu)
		s.step(i+1, placed+1)
		s.remove(n, pod, cpu)
	}
	for k := range s.kinds {
		n := s.openNode(&s.kinds[k])
		if s.allowed(pod, n, cpu) {
			s.add(n, pod, cpu)
			s.step(i+1, placed+1)
			s.remove(n, pod, cpu)
		}
		s.closeNode(n)
	}
	s.step(i+1, placed)
}

func (s *search) add(n *openNode, p *corev1.Pod, cpu resource.Quantity) {
	_ = s.snap.AddPod(n.name, p)
	n.used.Add(cpu)
	n.pods = append(n.pods, p)
}

func (s *search) remove(n *openNode, p *corev1.Pod, cpu resource.Quantity) {
	_ = s.snap.RemovePod(n.name, p)
	n.used.Sub(cpu)
	n.pods = n.pods[:len(n.pods)-1]
}

func (s *search) openNode(kind *nodeKind) *openNode {
	name := fmt.Sprintf("search-%d", len(s.open))
	node := kind.node.DeepCopy()
	node.Name = name
	node.Labels[corev1.LabelHostname] = name
	s.snap.AddNode(node, kind.daemons...)
	n := &openNode{kind: kind, name: name}
	s.open = append(s.open, n)
	return n
}

func (s *search) closeNode(n *openNode) {
	s.snap.RemoveNode(n.name)
	s.open = s.open[:len(s.open)-1]
}

// valid checks every placed pod with the Filter plugins, all other pods in place (the solver's Verify rule). A
// quick check of required pod affinity and spreads runs first; to keep it honest, the Filter plugins confirm its
// first rejections.
func (s *search) valid() bool {
	if !s.quickValid() {
		s.rejections++
		if s.rejections > confirmRejections {
			return false
		}
		if s.filterValid() {
			s.t.Errorf("the search's quick check refused a placement the Filter plugins accept: %s\n%s", s.describe(), s.summary)
		}
		return false
	}
	return s.filterValid()
}

// confirmRejections is how many of the quick check's rejections per case the Filter plugins confirm.
const confirmRejections = 40

func (s *search) filterValid() bool {
	for _, n := range s.open {
		for _, p := range n.pods {
			_ = s.snap.RemovePod(n.name, p)
			err := s.sim.Fits(s.ctx, p, n.name)
			_ = s.snap.AddPod(n.name, p)
			if err != nil {
				return false
			}
		}
	}
	return true
}

func (s *search) describe() string {
	var b strings.Builder
	for _, n := range s.open {
		var names []string
		for _, p := range n.pods {
			names = append(names, p.Name)
		}
		fmt.Fprintf(&b, "[%s: %v] ", n.kind.label, names)
	}
	return b.String()
}

// quickValid checks each placed pod's required pod affinity and hard spreads against the others, as
// InterPodAffinity and PodTopologySpread do (a pod's own node is counted without it).
func (s *search) quickValid() bool {
	type placed struct {
		pod  *corev1.Pod
		node *corev1.Node
	}
	var all []placed
	nodes := append([]*corev1.Node(nil), s.phantoms...)
	for _, n := range s.open {
		node := s.snap.NodeInfo(n.name).Node()
		nodes = append(nodes, node)
		for _, p := range n.pods {
			all = append(all, placed{p, node})
		}
	}
	for i, me := range all {
		if a := me.pod.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			terms := a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			satisfied, anyMatch, selfMatch := true, false, true
			for _, term := range terms {
				sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
				if err != nil {
					return true // leave it to the Filter plugins
				}
				if !sel.Matches(labels.Set(me.pod.Labels)) {
					selfMatch = false
				}
				found := false
				for j, other := range all {
					if j == i || other.pod.Namespace != me.pod.Namespace || !sel.Matches(labels.Set(other.pod.Labels)) {
						continue
					}
					if _, ok := other.node.Labels[term.TopologyKey]; ok {
						anyMatch = true
					}
					if v, ok := other.node.Labels[term.TopologyKey]; ok && v == me.node.Labels[term.TopologyKey] {
						found = true
					}
				}
				satisfied = satisfied && found
			}
			if !satisfied && (anyMatch || !selfMatch) {
				return false
			}
		}
		for _, c := range me.pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				return true
			}
			// only nodes the pod's node affinity allows count (nodeAffinityPolicy Honor)
			affinity := nodeaffinity.GetRequiredNodeAffinity(me.pod)
			eligible := func(node *corev1.Node) bool {
				_, ok := node.Labels[c.TopologyKey]
				match, err := affinity.Match(node)
				return ok && err == nil && match
			}
			counts := map[string]int{}
			for _, node := range nodes {
				if eligible(node) {
					counts[node.Labels[c.TopologyKey]] += 0
				}
			}
			for j, other := range all {
				if j == i || !eligible(other.node) || other.pod.Namespace != me.pod.Namespace || !sel.Matches(labels.Set(other.pod.Labels)) {
					continue
				}
				counts[other.node.Labels[c.TopologyKey]]++
			}
			least := -1
			for _, n := range counts {
				if least < 0 || n < least {
					least = n
				}
			}
			if least < 0 {
				least = 0
			}
			if counts[me.node.Labels[c.TopologyKey]]+1-least > int(c.MaxSkew) {
				return false
			}
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
