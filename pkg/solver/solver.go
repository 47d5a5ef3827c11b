package solver

import (
	"context"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// NodePoolOption is a NodePool with the instance types it may launch.
type NodePoolOption struct {
	// NodePool, normalised.
	NodePool *stevedorev1.NodePool
	// Requirements of the NodePool's nodes: its requirements and template labels.
	Requirements scheduling.Requirements
	// InstanceTypes compatible with the requirements that have an available offering.
	InstanceTypes []*cloud.InstanceType
	// Remaining is what the NodePool's limits still allow (nil: unlimited); "nodes" counts nodes.
	Remaining corev1.ResourceList
	// DaemonSetPods are one pod per DaemonSet of the cluster; those that would run on a new node are counted on it.
	DaemonSetPods []*corev1.Pod

	// MinValuesBestEffort plans nodes whose instance types cannot meet a requirement's minValues instead of leaving
	// their pods unschedulable (the plugin argument minValuesPolicy: BestEffort).
	MinValuesBestEffort bool

	// typeKeys are the label keys, beyond the well-known ones, that some instance type defines.
	typeKeys map[string]bool
	// daemonKeys are the node label keys the DaemonSets select on; daemons caches which DaemonSet pods run on a
	// node, by the node's values of those keys.
	daemonKeys   []string
	daemons      map[string]daemonSetsOnNode
	hasMinValues bool

	byPrice []pricedType
	// maxCapacity is the largest capacity of any instance type, per limited resource (computed once).
	maxCapacity map[corev1.ResourceName]float64
}

// limitsFar reports whether the NodePool's limits cannot be reached even if every one of nodes+1 nodes were its
// largest type: then no limit check is needed. It keeps limit checks off the solver's hot path for NodePools whose
// limits are a safety net far above the batch.
func (o *NodePoolOption) limitsFar(nodes int) bool {
	if o.Remaining == nil {
		return true
	}
	if o.maxCapacity == nil {
		o.maxCapacity = map[corev1.ResourceName]float64{}
		for name := range o.Remaining {
			for _, it := range o.InstanceTypes {
				if q, ok := it.Capacity[name]; ok && q.AsApproximateFloat64() > o.maxCapacity[name] {
					o.maxCapacity[name] = q.AsApproximateFloat64()
				}
			}
		}
	}
	n := float64(nodes + 1)
	for name, limit := range o.Remaining {
		if name == "nodes" {
			if limit.AsApproximateFloat64() < n {
				return false
			}
			continue
		}
		// a margin of one node more absorbs float rounding
		if limit.AsApproximateFloat64() < (n+1)*o.maxCapacity[name] {
			return false
		}
	}
	return true
}

// cheapest returns the NodePool's types ordered by their cheapest offering.
func (o *NodePoolOption) cheapest() []pricedType {
	if o.byPrice == nil {
		for _, it := range o.InstanceTypes {
			if p, ok := cheapestOffering(it, o.Requirements, "", ""); ok {
				o.byPrice = append(o.byPrice, pricedType{it: it, price: p, alloc: allocVec(it)})
			}
		}
		sort.SliceStable(o.byPrice, func(i, j int) bool { return o.byPrice[i].price < o.byPrice[j].price })
	}
	return o.byPrice
}

// InFlightNode is a node being launched (or registered, not yet initialized) that may take more pods. It is in the
// snapshot with its capacity and the pods already bound for it.
type InFlightNode struct {
	Name     string
	Claim    string
	NodePool string
}

// Input is one solve.
type Input struct {
	Pods      []*corev1.Pod
	NodePools []NodePoolOption
	// Snapshot holds the cluster's real nodes with their pods and the in-flight nodes; the solver adds virtual
	// nodes to it and removes them before returning.
	Snapshot *simulation.Snapshot
	InFlight []InFlightNode
	// TimeBudget bounds the improvement phase; 0 means greedy only.
	TimeBudget time.Duration
	// Region labels the virtual nodes (topology.kubernetes.io/region).
	Region string
	// FirstFitDecreasing replaces the price-aware placement by plain first-fit decreasing (largest pods first,
	// each on the first open node that takes it), the baseline the solver is measured against.
	FirstFitDecreasing bool
}

// Plan is the solver's answer.
type Plan struct {
	NewNodes []*PlannedNode
	// InFlight assigns pods to in-flight nodes, by node name.
	InFlight map[string][]*corev1.Pod
	// Unschedulable says why a pod got no node, by pod UID.
	Unschedulable map[types.UID]string
	// Cost is the hourly price of the new nodes.
	Cost float64
	// Duration of the solve.
	Duration time.Duration
}

// PlannedNode is a node to launch.
type PlannedNode struct {
	NodePool *stevedorev1.NodePool
	// InstanceTypes that fit the node's pods, cheapest first.
	InstanceTypes []*cloud.InstanceType
	// Requirements for the NodeClaim: the NodePool's and those the pods pinned (zone, capacity type...).
	Requirements scheduling.Requirements
	// PoolRequirements are the NodePool's own (its requirements and template labels): which labels it defines.
	PoolRequirements scheduling.Requirements
	// Offering priced: the cheapest offering of the cheapest type.
	InstanceType *cloud.InstanceType
	Offering     cloud.Offering
	Pods         []*corev1.Pod
	DaemonSets   []*corev1.Pod
	Requests     corev1.ResourceList
}

// Solver packs pods onto the cheapest nodes, checking every placement with the scheduler's Filter plugins.
type Solver struct {
	sim *simulation.Simulator
}

// NewSolver returns a solver using sim (whose snapshot becomes each Input's).
func NewSolver(sim *simulation.Simulator) *Solver { return &Solver{sim: sim} }

type solve struct {
	ctx      context.Context
	in       Input
	sim      *simulation.Simulator
	snap     *simulation.Snapshot
	open     []*openNode
	inflight []*inflightState
	nextID   int
	plan     *Plan
	reasons  map[types.UID]string
	candBuf  []openCand
	groups   []*spreadGroup
	watchers []watcher
	// rng, when set, shuffles the ways to place each pod (a randomised restart of a small batch).
	rng *rand.Rand
	// phantoms are the nodes standing for domains with no node yet (addPhantoms).
	phantoms []*corev1.Node
	// fragile are the placed pods whose required affinity holds only by selecting themselves (solver_affinity.go).
	fragile []fragileAffinity
	// affinityTargets are the selectors of every required pod affinity term, by selector, key and namespace.
	affinityTargets map[string]podSelector
	// companions maps a pod to the stranded pod whose required affinity it is placed for: the pod goes where the
	// companion can follow, keeping room for it, and the companion is placed right after it.
	companions map[types.UID]*corev1.Pod
	antiKeys   map[string]bool
	// daemonKeys are the label keys DaemonSets select on that no instance type decides: a node's value must be
	// pinned to know which DaemonSets run on it.
	daemonKeys []string
	// hasPreferNoSchedule is set when some NodePool has a PreferNoSchedule taint (all of them in
	// preferNoScheduleTaints): pods that do not tolerate it use such a NodePool last.
	hasPreferNoSchedule    bool
	preferNoScheduleTaints []corev1.Taint
	// beforeCommit, when set, sees an open node just before a placement changes it.
	beforeCommit func(*openNode)
}

// maxRepairRounds bounds how many times a solve is started over with the pods greedy placement stranded first;
// a batch of at most smallBatch pods that still strands a pod (or breaks a constraint) is then tried in up to
// smallBatchRestarts other orders, drawn from a seed the batch's pods decide.
const (
	maxRepairRounds    = 3
	smallBatch         = 24
	smallBatchRestarts = 256
)

// attempt is one way to run the greedy placement: an order, and companions (see repairOrder).
type attempt struct {
	order      []*corev1.Pod
	companions map[types.UID]*corev1.Pod
	// seed, when not 0, makes the attempt pick among the ways to place each pod at random.
	seed uint64
}

func sameAttempt(a, b attempt) bool {
	if len(a.order) != len(b.order) || len(a.companions) != len(b.companions) || a.seed != b.seed {
		return false
	}
	for i := range a.order {
		if a.order[i] != b.order[i] {
			return false
		}
	}
	for k, v := range a.companions {
		if b.companions[k] != v {
			return false
		}
	}
	return true
}

// attemptScore rates an attempt: pods left unschedulable plus pods whose placement the Filter plugins refuse with
// the others in place (checked for small batches), then the price.
type attemptScore struct {
	bad  int
	cost float64
}

func (a attemptScore) better(b attemptScore) bool {
	return a.bad < b.bad || (a.bad == b.bad && a.cost < b.cost-1e-9)
}

// batchSeed derives the restarts' seed from the batch's pods, so the same batch is always tried the same way.
func batchSeed(pods []*corev1.Pod) uint64 {
	h := fnv.New64a()
	for _, p := range pods {
		h.Write([]byte(p.Namespace + "/" + p.Name + "/" + string(p.UID) + ";"))
	}
	return h.Sum64()
}

type inflightState struct {
	InFlightNode
	free vec
}

// Solve places in.Pods. Pods are taken hardest first (see orderPods); when that greedy order leaves pods
// unschedulable, the solve starts over with those pods first, up to maxRepairRounds times, and the plan that
// places the most pods (then the cheapest) is kept: a pod is left unschedulable only when no order tried found it
// a node. The same input always gives the same plan.
func (s *Solver) Solve(ctx context.Context, in Input) (*Plan, error) {
	start := time.Now()
	s.sim.Use(in.Snapshot)
	pods := append([]*corev1.Pod(nil), in.Pods...)
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
	order := orderPods(pods)
	if in.FirstFitDecreasing {
		order = pods
		sort.SliceStable(order, func(i, j int) bool { return podVec(order[i]).weight() > podVec(order[j]).weight() })
	}
	st := s.newSolve(ctx, in)
	phantoms := st.addPhantoms()
	defer func() {
		for _, node := range phantoms {
			in.Snapshot.RemoveNode(node.Name)
		}
	}()
	run := func(a attempt) (*solve, error) {
		st := s.newSolve(ctx, in)
		st.companions, st.phantoms = a.companions, phantoms
		if a.seed != 0 {
			st.rng = rand.New(rand.NewPCG(a.seed, 1))
		}
		return st, st.placeAll(a.order)
	}
	first := attempt{order: order}
	st, err := run(first)
	if err != nil {
		return nil, err
	}
	bestScore, bestBad := st.score(len(pods) <= smallBatch)
	best, last := first, first
	try := func(a attempt) error {
		st.undo()
		var err error
		if st, err = run(a); err != nil {
			return err
		}
		last = a
		// a randomised attempt may ignore NodePool weights and prices: it wins only by placing more pods
		if sc, bad := st.score(len(pods) <= smallBatch); sc.better(bestScore) && (a.seed == 0 || sc.bad < bestScore.bad) {
			best, bestScore, bestBad = a, sc, bad
		}
		return nil
	}
	if !in.FirstFitDecreasing && bestScore.bad > 0 {
		// A pod that fits nowhere on its own (and needs no other pod) is not stranded by the order: no repair
		// can place it. Only the others are worth searching for.
		floor := 0
		st.undo()
		last = attempt{}
		for _, p := range pods {
			if _, ok := bestBad[p.UID]; !ok || hasRequiredPodAffinity(p) {
				continue
			}
			alone, err := run(attempt{order: []*corev1.Pod{p}})
			if err != nil {
				return nil, err
			}
			if len(alone.plan.Unschedulable) > 0 {
				floor++
			}
			alone.undo()
		}
		if st, err = run(first); err != nil {
			return nil, err
		}
		last = first
		for round := 0; round < maxRepairRounds && bestScore.bad > floor; round++ {
			before := bestScore
			next, companions := repairOrder(best.order, bestBad)
			if err := try(attempt{order: next, companions: companions}); err != nil {
				return nil, err
			}
			if !bestScore.better(before) {
				break
			}
		}
		if len(pods) <= smallBatch {
			// other orders, then also other choices of node at random (a randomised greedy): a small batch costs
			// milliseconds per attempt, and a hard combination of constraints may need a node greedy never picks
			rng := rand.New(rand.NewPCG(batchSeed(pods), 0))
			for i := 0; i < smallBatchRestarts && bestScore.bad > floor; i++ {
				shuffled := append([]*corev1.Pod(nil), order...)
				rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
				a := attempt{order: shuffled}
				if i >= smallBatchRestarts/4 {
					a.seed = rng.Uint64()
				}
				if err := try(a); err != nil {
					return nil, err
				}
			}
		}
		if !sameAttempt(last, best) {
			st.undo()
			if st, err = run(best); err != nil {
				return nil, err
			}
		}
	}
	if in.TimeBudget > 0 {
		st.improve(start.Add(in.TimeBudget))
	}
	st.finish()
	st.plan.Duration = time.Since(start)
	return st.plan, nil
}

// newSolve prepares one attempt at placing the input's pods.
func (s *Solver) newSolve(ctx context.Context, in Input) *solve {
	st := &solve{ctx: ctx, in: in, sim: s.sim, snap: in.Snapshot,
		plan:    &Plan{InFlight: map[string][]*corev1.Pod{}, Unschedulable: map[types.UID]string{}},
		reasons: map[types.UID]string{}}
	for _, f := range in.InFlight {
		ni := in.Snapshot.NodeInfo(f.Name)
		if ni == nil {
			continue
		}
		alloc := ni.GetAllocatable()
		req := ni.GetRequested()
		st.inflight = append(st.inflight, &inflightState{InFlightNode: f,
			free: vec{alloc.GetMilliCPU() - req.GetMilliCPU(), alloc.GetMemory() - req.GetMemory(), int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))}})
	}
	keys := map[string]bool{}
	for i := range in.NodePools {
		pool := &in.NodePools[i]
		for _, k := range pool.daemonKeys {
			if !scheduling.IsInstanceTypeKey(k) && !pool.typeKeys[k] {
				keys[k] = true
			}
		}
		for _, t := range pool.NodePool.Spec.Template.Spec.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				st.hasPreferNoSchedule = true
				st.preferNoScheduleTaints = append(st.preferNoScheduleTaints, t)
			}
		}
	}
	st.daemonKeys = slices.Sorted(maps.Keys(keys))
	return st
}

// placeAll places pods in order; the spread groups are built first.
func (st *solve) placeAll(pods []*corev1.Pod) error {
	if !st.in.FirstFitDecreasing {
		st.groups = spreadGroups(st.in.Pods, st.snap, possibleNodes(st.in.NodePools, st.in.Region))
	}
	for _, pod := range pods {
		if err := st.ctx.Err(); err != nil {
			return err
		}
		if st.place(pod) {
			continue
		}
		// Keeping other pods' spread constraints satisfiable in any binding order can leave no room for a pod
		// that only matches their selectors; place it as the scheduler would, on its own constraints alone.
		if groups := st.groups; groups != nil {
			if own := ownGroups(groups, pod); len(own) < len(groups) {
				st.groups = own
				placed := st.place(pod)
				st.groups = groups
				if placed {
					st.countPlaced(pod, own)
					continue
				}
			}
		}
		st.plan.Unschedulable[pod.UID] = st.reasonFor(pod)
	}
	return nil
}

// score rates the attempt (see attemptScore) and returns its bad pods: those unschedulable and, when verify is
// set, those the Filter plugins refuse where they are with every other planned pod in place.
func (st *solve) score(verify bool) (attemptScore, map[types.UID]string) {
	bad := maps.Clone(st.plan.Unschedulable)
	if verify {
		// The phantoms stay: a zone (or capacity type) a NodePool can launch into is a spread domain even with no
		// node there yet, since nodes whose pods do not care where they run are launched wherever EC2 finds
		// capacity (Karpenter counts domains the same way).
		check := func(node string, p *corev1.Pod) {
			if err := st.snap.RemovePod(node, p); err != nil {
				return
			}
			if err := st.sim.Fits(st.ctx, p, node); err != nil {
				bad[p.UID] = err.Error()
			}
			_ = st.snap.AddPod(node, p)
		}
		for _, n := range st.open {
			for _, p := range n.pods {
				check(n.name, p)
			}
		}
		for node, pods := range st.plan.InFlight {
			for _, p := range pods {
				check(node, p)
			}
		}
	}
	return attemptScore{bad: len(bad), cost: st.cost()}, bad
}

// cost is the hourly price of the open nodes as they stand.
func (st *solve) cost() float64 {
	total := 0.0
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		if p, _, _ := n.current(); !math.IsInf(p, 1) {
			total += p
		}
	}
	return total
}

// undo takes an attempt's virtual nodes out of the snapshot and its pods off the in-flight nodes.
func (st *solve) undo() {
	for _, n := range st.open {
		st.snap.RemoveNode(n.name)
	}
	for node, pods := range st.plan.InFlight {
		for _, p := range pods {
			_ = st.snap.RemovePod(node, p)
		}
	}
}

// hasRequiredPodAffinity reports whether a pod requires other pods near it.
func hasRequiredPodAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// repairOrder returns the order of a repair round: the pods stranded last time first, each part in its previous
// order; a stranded pod whose required pod affinity names other pods goes right after the first of them (its
// companion), which is placed where the stranded pod can follow it.
func repairOrder(order []*corev1.Pod, unschedulable map[types.UID]string) ([]*corev1.Pod, map[types.UID]*corev1.Pod) {
	companions := map[types.UID]*corev1.Pod{}
	follows := map[types.UID]*corev1.Pod{} // stranded pod -> the pod it follows
	for _, p := range order {
		if _, ok := unschedulable[p.UID]; !ok || companions[p.UID] != nil {
			continue // placed, or already another's companion
		}
		a := p.Spec.Affinity
		if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
			continue
		}
		sels := affinitySelectors(&corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: corev1.PodSpec{Affinity: &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[:1]}}}})
		if len(sels) == 0 {
			continue
		}
		// the smallest pod the term matches: the two must share a node (or domain)
		var companion *corev1.Pod
		for _, q := range order {
			if q.UID == p.UID || companions[q.UID] != nil || follows[q.UID] != nil || !sels[0].matches(q) {
				continue
			}
			if companion == nil || podVec(q).weight() < podVec(companion).weight() {
				companion = q
			}
		}
		if companion != nil {
			companions[companion.UID] = p
			follows[p.UID] = companion
		}
	}
	out := make([]*corev1.Pod, 0, len(order))
	emitted := map[types.UID]bool{}
	emit := func(p *corev1.Pod) {
		if !emitted[p.UID] {
			emitted[p.UID] = true
			out = append(out, p)
		}
	}
	for _, p := range order {
		if _, ok := unschedulable[p.UID]; !ok || companions[p.UID] != nil {
			continue
		}
		if q, ok := follows[p.UID]; ok {
			emit(q)
		}
		emit(p)
	}
	for _, p := range order {
		if q, ok := follows[p.UID]; ok {
			emit(q)
		}
		emit(p)
	}
	return out, companions
}

// orderPods sorts the hardest pods first: those that need a node of their own (required anti-affinity) or a
// spread, then those with required pod affinity, then the rest, each rank largest first. A pod another pod's
// affinity term (required or preferred) matches is placed before it, so the term finds it in the snapshot.
func orderPods(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	rank := func(p *corev1.Pod) int {
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return 0
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == corev1.DoNotSchedule {
				return 1
			}
		}
		if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return 2
		}
		return 3
	}
	ranks := make(map[types.UID]int, len(out))
	sizes := make(map[types.UID]float64, len(out))
	for _, p := range out {
		ranks[p.UID] = rank(p)
		sizes[p.UID] = podVec(p).weight()
	}
	// Pods with the same namespace and labels match the same terms: the terms are matched against each distinct
	// set once. A set's level is how long a chain of affinity terms leads to it (a set no other set's term
	// matches has level 0; the target of a level-n set's term has level n+1 at least); higher levels go first.
	type labelled struct {
		sample *corev1.Pod
		pods   []*corev1.Pod
		level  int
		rank   int
	}
	var sets []*labelled
	setOf := map[types.UID]*labelled{}
	byLabels := map[string]*labelled{}
	for _, p := range out {
		id := p.Namespace + "|" + labels.Set(p.Labels).String()
		l, ok := byLabels[id]
		if !ok {
			l = &labelled{sample: p, rank: ranks[p.UID]}
			byLabels[id] = l
			sets = append(sets, l)
		}
		l.pods = append(l.pods, p)
		setOf[p.UID] = l
	}
	type edge struct {
		from, to *labelled
		rank     int
	}
	seenEdge := map[[2]*labelled]bool{}
	var edges []edge
	for _, p := range out {
		from := setOf[p.UID]
		for _, sel := range affinitySelectors(p) {
			for _, to := range sets {
				if to == from || seenEdge[[2]*labelled{from, to}] || !sel.matches(to.sample) {
					continue
				}
				seenEdge[[2]*labelled{from, to}] = true
				edges = append(edges, edge{from, to, ranks[p.UID]})
			}
		}
	}
	for pass := 0; pass <= len(sets) && pass < 16; pass++ {
		changed := false
		for _, e := range edges {
			if e.from.level+1 > e.to.level {
				e.to.level = e.from.level + 1
				changed = true
			}
			if r := min(e.rank, e.from.rank); r < e.to.rank {
				e.to.rank = r
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	level := make(map[types.UID]int, len(out))
	for _, l := range sets {
		for _, p := range l.pods {
			level[p.UID] = l.level
			ranks[p.UID] = min(ranks[p.UID], l.rank)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].UID, out[j].UID
		if ranks[a] != ranks[b] {
			return ranks[a] < ranks[b]
		}
		if level[a] != level[b] {
			return level[a] > level[b]
		}
		return sizes[a] > sizes[b]
	})
	return out
}

// podSelector matches pods by namespace and labels, as a pod affinity term does.
type podSelector struct {
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector
}

func (s podSelector) matches(p *corev1.Pod) bool {
	return (s.namespaces == nil || s.namespaces[p.Namespace]) && s.selector.Matches(labels.Set(p.Labels))
}

// affinitySelectors returns the selectors of a pod's required and preferred pod affinity terms.
func affinitySelectors(p *corev1.Pod) []podSelector {
	a := p.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return nil
	}
	terms := append([]corev1.PodAffinityTerm(nil), a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, w.PodAffinityTerm)
	}
	var out []podSelector
	for _, t := range terms {
		if ps, ok := newPodSelector(p, t.LabelSelector, t.Namespaces, t.NamespaceSelector); ok {
			out = append(out, ps)
		}
	}
	return out
}

// newPodSelector is the selector of a term of owner (pod affinity, anti-affinity or spread) over other pods:
// its label selector in its namespaces (the owner's when none is named; any, with a namespace selector).
func newPodSelector(owner *corev1.Pod, sel *metav1.LabelSelector, namespaces []string, nsSelector *metav1.LabelSelector) (podSelector, bool) {
	if sel == nil {
		return podSelector{}, false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return podSelector{}, false
	}
	ps := podSelector{selector: s}
	if nsSelector == nil {
		ps.namespaces = map[string]bool{}
		if len(namespaces) == 0 {
			ps.namespaces[owner.Namespace] = true
		}
		for _, ns := range namespaces {
			ps.namespaces[ns] = true
		}
	}
	return ps, true
}

func (st *solve) reasonFor(pod *corev1.Pod) string {
	if r, ok := st.reasons[pod.UID]; ok {
		return r
	}
	return "no NodePool can launch a node this pod fits"
}

// countPlaced records in the spread groups a pod placed while they were set aside (all but counted).
func (st *solve) countPlaced(pod *corev1.Pod, counted []*spreadGroup) {
	var rest []*spreadGroup
	for _, g := range st.groups {
		if !slices.Contains(counted, g) {
			rest = append(rest, g)
		}
	}
	for _, n := range st.open {
		if len(n.pods) > 0 && n.pods[len(n.pods)-1].UID == pod.UID {
			groupsCount(rest, pod, st.snap.NodeInfo(n.name).Node())
			return
		}
	}
	for _, f := range st.inflight {
		for _, p := range st.plan.InFlight[f.Name] {
			if p.UID == pod.UID {
				groupsCount(rest, pod, st.snap.NodeInfo(f.Name).Node())
				return
			}
		}
	}
}
