package provision

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/provision/simulation"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
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
		sort.Slice(o.byPrice, func(i, j int) bool { return o.byPrice[i].price < o.byPrice[j].price })
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

// openNode is a virtual node the solver is filling.
type openNode struct {
	name       string
	pool       *NodePoolOption
	candidates []*cloud.InstanceType // still compatible and large enough, largest last is not assumed
	reqs       scheduling.Requirements
	zone, ct   string
	pinned     map[string]bool
	pods       []*corev1.Pod
	ds         []*corev1.Pod
	used       vec
	largest    *cloud.InstanceType
	cap        vec // allocatable of largest
	removed    bool
	region     string
	common     map[string]string
	commonFor  int
	seq        int
	byPrice    []pricedType
	// pricesDirty is set whenever candidates, zone, capacity type or pins change.
	pricesDirty bool
	// slack and price cache the cheapest type holding used: what it costs and what it leaves free.
	cachedFor   vec
	cachedPrice float64
	cachedSlack vec
	cachedIdx   int
	cacheValid  bool
}

// pricedType is an instance type with the price of its cheapest offering a node may use and its allocatable.
type pricedType struct {
	it    *cloud.InstanceType
	price float64
	alloc vec
}

// current returns the price of the cheapest type holding what the node uses now, what that type leaves free, and
// its index in byPrice.
func (n *openNode) current() (float64, vec, int) {
	n.refreshPrices()
	if n.cacheValid && n.cachedFor == n.used {
		return n.cachedPrice, n.cachedSlack, n.cachedIdx
	}
	n.cachedFor, n.cacheValid = n.used, true
	n.cachedPrice, n.cachedSlack, n.cachedIdx = math.Inf(1), vec{}, len(n.byPrice)
	for i, p := range n.byPrice {
		if n.used.fits(p.alloc) {
			n.cachedPrice, n.cachedSlack, n.cachedIdx = p.price, p.alloc.sub(n.used), i
			break
		}
	}
	return n.cachedPrice, n.cachedSlack, n.cachedIdx
}

// grow returns the price of the cheapest type holding what the node uses plus need, and what it leaves free.
func (n *openNode) grow(need vec) (float64, vec) {
	price, slack, idx := n.current()
	if need.fits(slack) {
		return price, slack.sub(need)
	}
	total := n.used.add(need)
	// byPrice is ordered by price, so the first type after the current one that holds the total is the cheapest
	// (types before it cannot hold even the current use)
	for _, p := range n.byPrice[min(idx, len(n.byPrice)):] {
		if total.fits(p.alloc) {
			return p.price, p.alloc.sub(total)
		}
	}
	return math.Inf(1), vec{}
}

// refreshPrices recomputes the price-ordered candidates when the candidates or the pinned offering changed.
func (n *openNode) refreshPrices() {
	if !n.pricesDirty && n.byPrice != nil {
		return
	}
	n.pricesDirty = false
	n.cacheValid = false
	n.byPrice = n.byPrice[:0]
	zone, ct := "", ""
	if n.pinned[corev1.LabelTopologyZone] {
		zone = n.zone
	}
	if n.pinned[stevedorev1.LabelCapacityType] {
		ct = n.ct
	}
	for _, it := range n.candidates {
		if p, ok := cheapestOffering(it, n.reqs, zone, ct); ok {
			n.byPrice = append(n.byPrice, pricedType{it: it, price: p, alloc: allocVec(it)})
		}
	}
	sort.Slice(n.byPrice, func(i, j int) bool { return n.byPrice[i].price < n.byPrice[j].price })
}

// cheapestOffering is the lowest price of an available offering reqs allow in zone and capacity type ct ("" for
// any).
func cheapestOffering(it *cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) (float64, bool) {
	zr, zok := reqs[corev1.LabelTopologyZone]
	cr, cok := reqs[stevedorev1.LabelCapacityType]
	best, found := math.Inf(1), false
	for _, o := range it.Offerings {
		if !o.Available || (zone != "" && o.Zone != zone) || (ct != "" && o.CapacityType != ct) {
			continue
		}
		if (!zok || zr.Has(o.Zone)) && (!cok || cr.Has(o.CapacityType)) && o.Price < best {
			best, found = o.Price, true
		}
	}
	return best, found
}

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
	watched  map[string][]nsSelector
	antiKeys map[string]bool
	// beforeCommit, when set, sees an open node just before a placement changes it.
	beforeCommit func(*openNode)
}

type openCand struct {
	n        *openNode
	marginal float64
	leftover float64
}

func betterCand(a, b openCand) bool {
	if a.marginal != b.marginal {
		return a.marginal < b.marginal
	}
	return a.leftover < b.leftover
}

// insertTop inserts c into list, kept sorted and at most keep long.
func insertTop(list []openCand, c openCand, keep int) []openCand {
	if len(list) == keep && !betterCand(c, list[keep-1]) {
		return list
	}
	i := len(list)
	if i < keep {
		list = append(list, c)
	} else {
		i = keep - 1
	}
	for i > 0 && betterCand(c, list[i-1]) {
		list[i] = list[i-1]
		i--
	}
	list[i] = c
	return list
}

type inflightState struct {
	InFlightNode
	free vec
}

// Solve places in.Pods.
func (s *Solver) Solve(ctx context.Context, in Input) (*Plan, error) {
	start := time.Now()
	s.sim.Use(in.Snapshot)
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
	phantoms := st.addPhantoms()
	defer func() {
		for _, name := range phantoms {
			st.snap.RemoveNode(name)
		}
	}()
	st.groups = spreadGroups(in.Pods, in.Snapshot)
	pods := orderPods(in.Pods)
	if in.FirstFitDecreasing {
		st.groups = nil
		pods = append([]*corev1.Pod(nil), in.Pods...)
		sort.SliceStable(pods, func(i, j int) bool { return podVec(pods[i]).weight() > podVec(pods[j]).weight() })
	}
	for _, pod := range pods {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if st.place(pod) {
			continue
		}
		// Keeping other pods' spread constraints satisfiable in any binding order can leave no room for a pod
		// that only matches their selectors; place it as the scheduler would, on its own constraints alone.
		if groups := st.groups; groups != nil && !st.ownsGroup(pod) {
			st.groups = nil
			placed := st.place(pod)
			st.groups = groups
			if placed {
				st.countPlaced(pod)
				continue
			}
		}
		st.plan.Unschedulable[pod.UID] = st.reasonFor(pod)
	}
	if in.TimeBudget > 0 {
		st.improve(start.Add(in.TimeBudget))
	}
	st.finish()
	st.plan.Duration = time.Since(start)
	return st.plan, nil
}

// PhantomTaint keeps every pod off the phantom nodes that stand for topology domains with no node yet.
const PhantomTaint = "stevedore.dev/phantom"

// addPhantoms adds, for every zone (and capacity type and architecture) a NodePool can launch into, an empty
// node no pod fits, so that topology spread sees the domains new nodes may open and does not pack a spread
// workload into the zones that happen to have nodes. Phantoms have no hostname label: they are not hostname
// domains.
func (st *solve) addPhantoms() []string {
	seen := map[string]bool{}
	var names []string
	for i := range st.in.NodePools {
		pool := &st.in.NodePools[i]
		for _, it := range pool.InstanceTypes {
			for _, o := range it.Offerings.Compatible(pool.Requirements) {
				labels := pool.Requirements.Labels()
				for k, v := range pool.NodePool.Spec.Template.ObjectMeta.Labels {
					labels[k] = v
				}
				labels[corev1.LabelTopologyZone] = o.Zone
				labels[stevedorev1.LabelCapacityType] = o.CapacityType
				labels[corev1.LabelArchStable] = it.Requirements.Get(corev1.LabelArchStable).Any()
				labels[corev1.LabelOSStable] = "linux"
				if st.in.Region != "" {
					labels[corev1.LabelTopologyRegion] = st.in.Region
				}
				labels[stevedorev1.LabelNodePool] = pool.NodePool.Name
				key := fmt.Sprint(labels)
				if seen[key] {
					continue
				}
				seen[key] = true
				name := fmt.Sprintf("stevedore-phantom-%d", len(names))
				st.snap.AddNode(&corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
					Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: PhantomTaint, Effect: corev1.TaintEffectNoSchedule}}},
					Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0"),
						corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}},
				})
				names = append(names, name)
			}
		}
	}
	return names
}

// orderPods sorts the hardest pods first: those that need a node of their own (required anti-affinity) or a
// spread, then the rest by size, largest first.
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
	sizes := make(map[types.UID]float64, len(out))
	for _, p := range out {
		sizes[p.UID] = podVec(p).weight()
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		return sizes[out[i].UID] > sizes[out[j].UID]
	})
	return out
}

func (st *solve) reasonFor(pod *corev1.Pod) string {
	if r, ok := st.reasons[pod.UID]; ok {
		return r
	}
	return "no NodePool can launch a node this pod fits"
}

// place puts one pod on an in-flight node, an open virtual node, or a new virtual node, in that order.
func (st *solve) place(pod *corev1.Pod) bool {
	state, pre, status := st.sim.PreFilter(st.ctx, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		st.reasons[pod.UID] = "PreFilter: " + status.Message()
		return false
	}
	need := podVec(pod)
	allowed := func(name string) bool { return pre.AllNodes() || pre.NodeNames.Has(name) }
	// in-flight nodes, fullest first
	sort.SliceStable(st.inflight, func(i, j int) bool { return st.inflight[i].free.weight() < st.inflight[j].free.weight() })
	for _, f := range st.inflight {
		if !need.fits(f.free) || !allowed(f.Name) {
			continue
		}
		labels := st.snap.NodeInfo(f.Name).Node().Labels
		if !groupsAllow(st.groups, pod, labels) {
			continue
		}
		if st.sim.Filter(st.ctx, state, pod, f.Name).IsSuccess() {
			if err := st.snap.AddPod(f.Name, pod); err != nil {
				continue
			}
			groupsCount(st.groups, pod, labels)
			f.free = f.free.sub(need)
			st.plan.InFlight[f.Name] = append(st.plan.InFlight[f.Name], pod)
			return true
		}
	}
	podReqs := podRequirements(pod)
	cared := caredKeys(pod)
	for _, g := range st.groups {
		if g.key != corev1.LabelHostname && g.matches(pod) {
			cared[g.key] = true // another pod's spread constraint counts this one
		}
	}
	return st.placeOnOpen(pod, state, need, podReqs, cared, allowed)
}

const maxOpenTries = 12

// placeOnOpen tries the open virtual nodes that can take the pod, those whose price grows least first (a pod that
// fills slack the node's instance type already pays for costs nothing), then the fullest. Nodes whose growth
// costs more than a new node are tried only after a new node was refused.
func (st *solve) placeOnOpen(pod *corev1.Pod, state fwk.CycleState, need vec, podReqs []scheduling.Requirements, cared map[string]bool, allowed func(string) bool) bool {
	return st.placeOnOpenWith(pod, state, need, podReqs, cared, allowed, placeOptions{allowNew: true, maxMarginal: math.Inf(1)})
}

// placeOptions restrict a placement during improvement: no new node, not on the node being emptied, and only
// where the price grows by less than what moving the pod saves.
type placeOptions struct {
	allowNew    bool
	exclude     *openNode
	maxMarginal float64
}

func (st *solve) placeOnOpenWith(pod *corev1.Pod, state fwk.CycleState, need vec, podReqs []scheduling.Requirements, cared map[string]bool, allowed func(string) bool, opts placeOptions) bool {
	// Keep the best candidates by (marginal cost, leftover) without sorting them all. A pod whose placement
	// depends on the zone or capacity type gets the best of each (zone, capacity type) the nodes have, so that a
	// run of well-fitting nodes in the wrong zone does not hide the right ones.
	const keep = 2 * maxOpenTries
	byZone := cared[corev1.LabelTopologyZone] || cared[stevedorev1.LabelCapacityType]
	buckets := map[string][]openCand{}
	for _, n := range st.open {
		if n.removed || n == opts.exclude || !allowed(n.name) {
			continue
		}
		if !need.fits(n.cap.sub(n.used)) {
			continue // not even the largest candidate type holds it
		}
		before, _, _ := n.current()
		after, left := n.grow(need)
		c := openCand{n, after - before, left.weight()}
		if c.marginal >= opts.maxMarginal {
			continue
		}
		if st.in.FirstFitDecreasing {
			c = openCand{n, 0, float64(n.seq)}
		}
		key := ""
		if byZone {
			key = n.zone + "/" + n.ct
		}
		buckets[key] = insertTop(buckets[key], c, keep)
	}
	cands := st.candBuf[:0]
	for _, b := range buckets {
		cands = append(cands, b...)
	}
	sort.Slice(cands, func(i, j int) bool { return betterCand(cands[i], cands[j]) })
	st.candBuf = cands
	newCost := math.Inf(1)
	if opts.allowNew && !st.in.FirstFitDecreasing {
		newCost = st.newNodeCost(need, podReqs)
	}
	tries, limit := 0, maxOpenTries
	if byZone {
		limit = maxOpenTries * len(buckets)
	}
	for _, c := range cands {
		if tries == limit || c.marginal > newCost {
			break
		}
		tries++
		if st.tryOpen(c.n, pod, state, need, podReqs, cared) {
			return true
		}
	}
	if !opts.allowNew {
		return false
	}
	if st.openFor(pod, state, need, podReqs, cared) {
		return true
	}
	for _, c := range cands {
		if c.marginal <= newCost {
			continue
		}
		if tries == 2*limit {
			break
		}
		tries++
		if st.tryOpen(c.n, pod, state, need, podReqs, cared) {
			return true
		}
	}
	return false
}

// newNodeCost estimates what a new node for the pod would cost: the cheapest type of the first NodePool that
// has one fitting it.
func (st *solve) newNodeCost(need vec, podReqs []scheduling.Requirements) float64 {
	for i := range st.in.NodePools {
		pool := &st.in.NodePools[i]
		best := math.Inf(1)
		for _, pr := range podReqs {
			if pool.Requirements.Intersects(pr) != nil {
				continue
			}
			for _, p := range pool.cheapest() {
				if need.fits(p.alloc) {
					if p.price < best {
						best = p.price
					}
					break
				}
			}
		}
		if !math.IsInf(best, 1) {
			return best
		}
	}
	return math.Inf(1)
}

// tryOpen narrows an open node to what the pod needs and runs the Filter plugins; on success the pod is placed
// and the narrowing kept, on failure the node is restored.
func (st *solve) tryOpen(n *openNode, pod *corev1.Pod, state fwk.CycleState, need vec, podReqs []scheduling.Requirements, cared map[string]bool) bool {
	for _, pr := range podReqs {
		if n.reqs.Intersects(pr) != nil {
			continue
		}
		total := n.used.add(need)
		// Candidates narrow only by compatibility: which of them is big enough is decided when the node is
		// priced, so a node can shrink again when pods leave it.
		reqs, cands := n.reqs, n.candidates
		if len(pr) > 0 {
			reqs = n.reqs.Clone()
			reqs.AddAll(pr)
			cands = filterTypes(n.candidates, reqs, vec{}, n.pinned, n.zone, n.ct)
		}
		if len(cands) == 0 || !total.fits(allocVec(largestType(cands))) {
			continue
		}
		for _, choice := range offeringChoices(cands, reqs, cared, n) {
			if !total.fits(allocVec(largestType(choice.candidates))) || !st.growthWithinLimits(n, choice.candidates, choice.reqs, total) {
				continue
			}
			trial := *n
			trial.reqs = choice.reqs
			trial.candidates = choice.candidates
			trial.zone, trial.ct = choice.zone, choice.ct
			trial.pinned = choice.pinned
			trial.setLargest()
			current := st.snap.NodeInfo(n.name).Node()
			next := trial.node()
			st.snap.NodeInfo(n.name).SetNode(next)
			s2 := state
			// an empty node (DaemonSet pods aside) adds no pod to any domain, so relabelling it leaves the
			// PreFilter state as it was
			if s2 == nil || (len(n.pods) > 0 && st.labelsMatter(pod, current.Labels, next.Labels)) {
				// PreFilter state was computed with the node's previous labels; spread and affinity must see
				// the node as it would be
				var status *fwk.Status
				if s2, _, status = st.sim.PreFilter(st.ctx, pod); !status.IsSuccess() && !status.IsSkip() {
					st.snap.NodeInfo(n.name).SetNode(current)
					continue
				}
			}
			if groupsAllow(st.groups, pod, next.Labels) && st.sim.Filter(st.ctx, s2, pod, n.name).IsSuccess() {
				trial.pricesDirty = trial.pricesDirty || len(trial.candidates) != len(n.candidates) || trial.zone != n.zone ||
					trial.ct != n.ct || len(trial.pinned) != len(n.pinned)
				if st.beforeCommit != nil {
					st.snap.NodeInfo(n.name).SetNode(current)
					st.beforeCommit(n)
					st.snap.NodeInfo(n.name).SetNode(next)
				}
				*n = trial
				n.pods = append(n.pods, pod)
				n.used = total
				_ = st.snap.AddPod(n.name, pod)
				groupsCount(st.groups, pod, next.Labels)
				st.pinIfWatched(n, pod)
				return true
			}
			st.snap.NodeInfo(n.name).SetNode(current)
		}
	}
	return false
}

// ownsGroup reports whether the pod carries one of the spread constraints the groups track.
func (st *solve) ownsGroup(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

// countPlaced records in the spread groups a pod placed while they were set aside.
func (st *solve) countPlaced(pod *corev1.Pod) {
	for _, n := range st.open {
		if len(n.pods) > 0 && n.pods[len(n.pods)-1].UID == pod.UID {
			groupsCount(st.groups, pod, st.snap.NodeInfo(n.name).Node().Labels)
			return
		}
	}
	for _, f := range st.inflight {
		for _, p := range st.plan.InFlight[f.Name] {
			if p.UID == pod.UID {
				groupsCount(st.groups, pod, st.snap.NodeInfo(f.Name).Node().Labels)
				return
			}
		}
	}
}

// labelsMatter reports whether a node's labels changed in a key the pod's PreFilter state depends on: the topology
// keys of its own constraints, and those of the required anti-affinity terms of the pods around.
func (st *solve) labelsMatter(pod *corev1.Pod, before, after map[string]string) bool {
	if st.antiKeys == nil {
		st.antiKeys = antiAffinityKeys(st.in.Pods, st.snap)
	}
	own := caredKeys(pod)
	for k, v := range after {
		if before[k] != v && (own[k] || st.antiKeys[k]) {
			return true
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok && (own[k] || st.antiKeys[k]) {
			return true
		}
	}
	return false
}

// antiAffinityKeys are the topology keys of every required anti-affinity term of the batch and of the pods in the
// snapshot.
func antiAffinityKeys(pods []*corev1.Pod, snap *simulation.Snapshot) map[string]bool {
	keys := map[string]bool{}
	add := func(p *corev1.Pod) {
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
		}
	}
	for _, p := range pods {
		add(p)
	}
	withAnti, _ := snap.HavePodsWithRequiredAntiAffinityList()
	for _, ni := range withAnti {
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			add(pi.GetPod())
		}
	}
	return keys
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

type offeringChoice struct {
	reqs       scheduling.Requirements
	candidates []*cloud.InstanceType
	zone, ct   string
	pinned     map[string]bool
}

// offeringChoices lists the ways a node may be labelled for a pod: when the pod cares about the zone or capacity
// type and the node has not pinned them, each available value is a choice (cheapest first); keys the pod cares
// about that vary among the candidate types are pinned to the largest candidate's value.
func offeringChoices(cands []*cloud.InstanceType, reqs scheduling.Requirements, cared map[string]bool, n *openNode) []offeringChoice {
	pinned := map[string]bool{}
	for k := range n.pinned {
		pinned[k] = true
	}
	reqs = reqs.Clone()
	// pin type-level keys the pod cares about
	for key := range cared {
		if isOfferingKey(key) || pinned[key] {
			continue
		}
		largest := largestType(cands)
		if v, ok := largest.Labels()[key]; ok {
			reqs.Add(scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, v))
			cands = filterTypes(cands, reqs, vec{}, nil, "", "")
		}
		pinned[key] = true
	}
	zones := []string{n.zone}
	cts := []string{n.ct}
	careZone := cared[corev1.LabelTopologyZone] && !n.pinned[corev1.LabelTopologyZone]
	careCT := cared[stevedorev1.LabelCapacityType] && !n.pinned[stevedorev1.LabelCapacityType]
	if careZone || careCT || !offeringAvailable(cands, reqs, n.zone, n.ct) {
		allZones, allCTs := offeringValues(cands, reqs)
		// vary only what the pod cares about (or what is no longer offered), keeping the node's current value first
		if careZone || !offeringAvailable(cands, reqs, n.zone, "") {
			zones = preferFirst(allZones, n.zone)
		}
		if careCT || !offeringAvailable(cands, reqs, "", n.ct) {
			cts = preferFirst(allCTs, n.ct)
		}
	}
	var out []offeringChoice
	for _, z := range zones {
		for _, ct := range cts {
			r := reqs.Clone()
			p := map[string]bool{}
			for k := range pinned {
				p[k] = true
			}
			if careZone || n.pinned[corev1.LabelTopologyZone] {
				r.Add(scheduling.MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, z))
				p[corev1.LabelTopologyZone] = true
			}
			if careCT || n.pinned[stevedorev1.LabelCapacityType] {
				r.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, ct))
				p[stevedorev1.LabelCapacityType] = true
			}
			c := filterTypesOffering(cands, r, z, ct)
			if len(c) == 0 {
				continue
			}
			out = append(out, offeringChoice{reqs: r, candidates: c, zone: z, ct: ct, pinned: p})
		}
	}
	return out
}

// preferFirst moves v to the front of values if it is there.
func preferFirst(values []string, v string) []string {
	out := make([]string, 0, len(values))
	for _, x := range values {
		if x == v {
			out = append([]string{x}, out...)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// offeringValues returns the zones and capacity types the candidates offer under reqs, cheapest first.
func offeringValues(cands []*cloud.InstanceType, reqs scheduling.Requirements) ([]string, []string) {
	zonePrice, ctPrice := map[string]float64{}, map[string]float64{}
	for _, it := range cands {
		for _, o := range it.Offerings.Compatible(reqs) {
			if p, ok := zonePrice[o.Zone]; !ok || o.Price < p {
				zonePrice[o.Zone] = o.Price
			}
			if p, ok := ctPrice[o.CapacityType]; !ok || o.Price < p {
				ctPrice[o.CapacityType] = o.Price
			}
		}
	}
	return byPrice(zonePrice), byPrice(ctPrice)
}

func byPrice(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]] != m[out[j]] {
			return m[out[i]] < m[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

func offeringAvailable(cands []*cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) bool {
	for _, it := range cands {
		if hasOffering(it, reqs, zone, ct) {
			return true
		}
	}
	return false
}

// filterTypes keeps the types compatible with reqs that can hold total (and, when zone and capacity type are
// given and pinned, offer them).
func filterTypes(types []*cloud.InstanceType, reqs scheduling.Requirements, total vec, pinned map[string]bool, zone, ct string) []*cloud.InstanceType {
	out := make([]*cloud.InstanceType, 0, len(types))
	for _, it := range types {
		if reqs.Compatible(it.Requirements, definedByNodePool) != nil {
			continue
		}
		if !total.fits(allocVec(it)) {
			continue
		}
		if !it.Offerings.HasCompatible(reqs) {
			continue
		}
		out = append(out, it)
	}
	if pinned != nil && (pinned[corev1.LabelTopologyZone] || pinned[stevedorev1.LabelCapacityType]) {
		return filterTypesOffering(out, reqs, zone, ct)
	}
	return out
}

// instanceTypeKeys are the labels an instance type or offering decides; any other label a requirement names is
// set by the NodePool (template labels, custom requirements) and checked against it instead.
func definedByNodePool(key string) bool {
	switch key {
	case corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable,
		stevedorev1.LabelInstanceCategory, stevedorev1.LabelInstanceFamily, stevedorev1.LabelInstanceGeneration,
		stevedorev1.LabelInstanceSize, stevedorev1.LabelInstanceCPU, stevedorev1.LabelInstanceMemory,
		stevedorev1.LabelInstanceHypervisor, corev1.LabelTopologyZone, stevedorev1.LabelCapacityType:
		return false
	}
	return true
}

// filterTypesOffering keeps the types with an available offering reqs allow in zone with capacity type ct (either
// may be "" for any).
func filterTypesOffering(types []*cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) []*cloud.InstanceType {
	out := make([]*cloud.InstanceType, 0, len(types))
	for _, it := range types {
		if hasOffering(it, reqs, zone, ct) {
			out = append(out, it)
		}
	}
	return out
}

// hasOffering reports whether an instance type has an available offering reqs allow in zone with capacity type
// ct (either may be "" for any).
func hasOffering(it *cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) bool {
	zr, zok := reqs[corev1.LabelTopologyZone]
	cr, cok := reqs[stevedorev1.LabelCapacityType]
	for _, o := range it.Offerings {
		if !o.Available || (zone != "" && o.Zone != zone) || (ct != "" && o.CapacityType != ct) {
			continue
		}
		if (!zok || zr.Has(o.Zone)) && (!cok || cr.Has(o.CapacityType)) {
			return true
		}
	}
	return false
}

// allocVec is an instance type's allocatable as a vec.
func allocVec(it *cloud.InstanceType) vec {
	c, m, p := it.AllocatableCPUMemoryPods()
	return vec{c, m, p}
}

func largestType(types []*cloud.InstanceType) *cloud.InstanceType {
	var best *cloud.InstanceType
	var bestW float64
	for _, it := range types {
		w := allocVec(it).weight()
		if best == nil || w > bestW {
			best, bestW = it, w
		}
	}
	return best
}

// setLargest updates the representative (largest) candidate, the capacity it gives and the labels all candidates
// share. Candidates only ever shrink, so an unchanged count means an unchanged set.
func (n *openNode) setLargest() {
	if n.largest != nil && len(n.candidates) == n.commonFor {
		return
	}
	n.largest = largestType(n.candidates)
	n.cap = allocVec(n.largest)
	n.common = commonLabels(n.candidates)
	n.commonFor = len(n.candidates)
}

// node renders the virtual node: labels common to all candidates (so a Filter never relies on a label the
// launched type might not have), the representative zone and capacity type, the NodePool's labels and taints,
// and the largest candidate's allocatable.
func (n *openNode) node() *corev1.Node {
	labels := make(map[string]string, len(n.common)+8)
	for k, v := range n.common {
		labels[k] = v
	}
	for k, v := range n.reqs.Labels() {
		labels[k] = v
	}
	labels[corev1.LabelTopologyZone] = n.zone
	labels[stevedorev1.LabelCapacityType] = n.ct
	labels[corev1.LabelHostname] = n.name
	labels[stevedorev1.LabelNodePool] = n.pool.NodePool.Name
	if n.region != "" {
		labels[corev1.LabelTopologyRegion] = n.region
	}
	for k, v := range n.pool.NodePool.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: n.pool.NodePool.Spec.Template.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.largest.Allocatable(), Capacity: n.largest.Capacity},
	}
}

// commonLabels returns the labels every type has with the same value.
func commonLabels(types []*cloud.InstanceType) map[string]string {
	if len(types) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range types[0].Labels() {
		out[k] = v
	}
	for _, it := range types[1:] {
		l := it.Labels()
		for k, v := range out {
			if l[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// openFor opens a new virtual node for a pod: the first NodePool (by weight) whose types fit it and whose
// virtual node the Filter plugins accept.
func (st *solve) openFor(pod *corev1.Pod, state fwk.CycleState, need vec, podReqs []scheduling.Requirements, cared map[string]bool) bool {
	var why []string
	for i := range st.in.NodePools {
		pool := &st.in.NodePools[i]
		ok, reason := st.openOn(pool, pod, state, need, podReqs, cared)
		if ok {
			return true
		}
		why = append(why, fmt.Sprintf("NodePool %s: %s", pool.NodePool.Name, reason))
	}
	if len(st.in.NodePools) == 0 {
		st.reasons[pod.UID] = "no NodePool exists"
	} else {
		st.reasons[pod.UID] = strings.Join(why, "; ")
	}
	return false
}

func (st *solve) openOn(pool *NodePoolOption, pod *corev1.Pod, state fwk.CycleState, need vec, podReqs []scheduling.Requirements, cared map[string]bool) (bool, string) {
	reason := "no instance type of the NodePool fits the pod"
	for _, pr := range podReqs {
		if err := pool.Requirements.Intersects(pr); err != nil {
			reason = "the pod's node requirements conflict with the NodePool's: " + err.Error()
			continue
		}
		reqs := pool.Requirements.Clone()
		reqs.AddAll(pr)
		cands := filterTypes(pool.InstanceTypes, reqs, need, nil, "", "")
		if len(cands) == 0 {
			reason = tooLarge(pool.InstanceTypes, reqs, need)
			continue
		}
		if cands = st.withinLimits(pool, cands); len(cands) == 0 {
			reason = "the NodePool's limits are reached"
			continue
		}
		st.nextID++
		n := &openNode{name: fmt.Sprintf("stevedore-virtual-%d", st.nextID), pool: pool, candidates: cands, reqs: reqs,
			pinned: map[string]bool{}, region: st.in.Region, seq: st.nextID}
		zones, cts := offeringValues(cands, reqs)
		if len(zones) == 0 || len(cts) == 0 {
			continue
		}
		n.zone, n.ct = zones[0], cts[0]
		n.setLargest()
		fresh := n.node()
		st.snap.AddNode(fresh)
		groupsAddNode(st.groups, map[string]string{corev1.LabelHostname: n.name})
		n.ds = st.daemonSetsFor(n)
		n.used = vec{}
		for _, d := range n.ds {
			n.used = n.used.add(podVec(d))
		}
		// The pod's PreFilter state predates the new node. Filter plugins read an empty node's domains as
		// holding no matching pod, which is what a fresh PreFilter would count, so the state stays valid unless
		// DaemonSet pods landed on the node.
		s := state
		if len(n.ds) > 0 {
			s = nil
		}
		if st.tryOpen(n, pod, s, need, []scheduling.Requirements{reqs}, cared) {
			st.open = append(st.open, n)
			return true, ""
		}
		st.snap.RemoveNode(n.name)
		groupsRemoveNode(st.groups, fresh.Labels)
		reason = "the scheduler's Filter plugins reject the pod on a new node of this NodePool (taints, affinity or spread)"
	}
	return false, reason
}

// tooLarge says why no instance type fits a pod that requests need: none the requirements allow has an available
// offering, or the largest allowed ones are smaller than the pod.
func tooLarge(types []*cloud.InstanceType, reqs scheduling.Requirements, need vec) string {
	allowed := filterTypes(types, reqs, vec{}, nil, "", "")
	if len(allowed) == 0 {
		return "no instance type the NodePool and the pod's node requirements allow has an available offering"
	}
	var most vec
	var cpuType, memType, podsType string
	for _, it := range allowed {
		a := allocVec(it)
		if a.cpu > most.cpu {
			most.cpu, cpuType = a.cpu, it.Name
		}
		if a.mem > most.mem {
			most.mem, memType = a.mem, it.Name
		}
		if a.pods > most.pods {
			most.pods, podsType = a.pods, it.Name
		}
	}
	var short []string
	if need.cpu > most.cpu {
		short = append(short, fmt.Sprintf("cpu %s (the most any allowed type has is %s, %s)",
			resource.NewMilliQuantity(need.cpu, resource.DecimalSI), resource.NewMilliQuantity(most.cpu, resource.DecimalSI), cpuType))
	}
	if need.mem > most.mem {
		short = append(short, fmt.Sprintf("memory %s (the most any allowed type has is %s, %s)",
			resource.NewQuantity(need.mem, resource.BinarySI), resource.NewQuantity(most.mem, resource.BinarySI), memType))
	}
	if need.pods > most.pods {
		short = append(short, fmt.Sprintf("%d pods (the most any allowed type takes is %d, %s)", need.pods, most.pods, podsType))
	}
	if len(short) == 0 {
		return fmt.Sprintf("no single instance type of the %d the NodePool allows has room for the pod's %s", len(allowed), need)
	}
	return "the pod requests " + strings.Join(short, " and ") + ", counted on allocatable"
}

// daemonSetsFor adds to a fresh virtual node the DaemonSet pods the scheduler would run on it.
func (st *solve) daemonSetsFor(n *openNode) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range n.pool.DaemonSetPods {
		if err := st.sim.Fits(st.ctx, d, n.name); err != nil {
			continue
		}
		_ = st.snap.AddPod(n.name, d)
		out = append(out, d)
	}
	return out
}

// withinLimits keeps the types that fit what the NodePool's limits still allow after the nodes already planned.
func (st *solve) withinLimits(pool *NodePoolOption, types []*cloud.InstanceType) []*cloud.InstanceType {
	if pool.limitsFar(len(st.open)) {
		return types
	}
	used, count := st.poolUsage(pool, nil)
	if nodes, ok := pool.Remaining["nodes"]; ok && count+1 > nodes.Value() {
		return nil
	}
	var out []*cloud.InstanceType
	for _, it := range types {
		if fitsLimits(used, it, pool.Remaining) {
			out = append(out, it)
		}
	}
	return out
}

// poolUsage sums the capacity of the cheapest type each open node of the pool needs now (except one node).
func (st *solve) poolUsage(pool *NodePoolOption, except *openNode) (corev1.ResourceList, int64) {
	used := corev1.ResourceList{}
	count := int64(0)
	for _, n := range st.open {
		if n.removed || n.pool != pool || n == except {
			continue
		}
		count++
		_, _, idx := n.current()
		it := n.largest
		if idx < len(n.byPrice) {
			it = n.byPrice[idx].it
		}
		for name, q := range it.Capacity {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	return used, count
}

// fitsLimits reports whether one more node of type it keeps used within the remaining limits.
func fitsLimits(used corev1.ResourceList, it *cloud.InstanceType, remaining corev1.ResourceList) bool {
	for name, limit := range remaining {
		if name == "nodes" {
			continue
		}
		total := used[name].DeepCopy()
		total.Add(it.Capacity[name])
		if total.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

// growthWithinLimits reports whether a node of a limited NodePool may grow to hold total: the cheapest candidate
// holding it must keep the pool within its limits.
func (st *solve) growthWithinLimits(n *openNode, candidates []*cloud.InstanceType, reqs scheduling.Requirements, total vec) bool {
	if n.pool.limitsFar(len(st.open)) {
		return true
	}
	zone, ct := "", ""
	if n.pinned[corev1.LabelTopologyZone] {
		zone = n.zone
	}
	if n.pinned[stevedorev1.LabelCapacityType] {
		ct = n.ct
	}
	var best *cloud.InstanceType
	bestPrice := math.Inf(1)
	for _, it := range candidates {
		if !total.fits(allocVec(it)) {
			continue
		}
		if p, ok := cheapestOffering(it, reqs, zone, ct); ok && p < bestPrice {
			best, bestPrice = it, p
		}
	}
	if best == nil {
		return false
	}
	used, _ := st.poolUsage(n.pool, n)
	return fitsLimits(used, best, n.pool.Remaining)
}

// finish picks each node's cheapest fitting type, builds the plan and takes the virtual nodes out of the
// snapshot.
func (st *solve) finish() {
	for _, n := range st.open {
		st.snap.RemoveNode(n.name)
		if n.removed || len(n.pods) == 0 {
			continue
		}
		pn := st.planNode(n)
		if pn == nil {
			for _, p := range n.pods {
				st.plan.Unschedulable[p.UID] = "no instance type fits the pods planned together"
			}
			continue
		}
		st.plan.NewNodes = append(st.plan.NewNodes, pn)
		st.plan.Cost += pn.Offering.Price
	}
}

// offeringSelectors returns, per offering key (zone, capacity type), the selectors of the pods' hard constraints
// on that key (spread, pod affinity and anti-affinity), with their namespaces.
func offeringSelectors(pods []*corev1.Pod) map[string][]nsSelector {
	out := map[string][]nsSelector{}
	add := func(key string, ns string, sel *metav1.LabelSelector) {
		if !isOfferingKey(key) || sel == nil {
			return
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return
		}
		out[key] = append(out[key], nsSelector{namespace: ns, selector: s})
	}
	for _, p := range pods {
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == corev1.DoNotSchedule {
				add(c.TopologyKey, p.Namespace, c.LabelSelector)
			}
		}
		if a := p.Spec.Affinity; a != nil {
			if a.PodAffinity != nil {
				for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					add(t.TopologyKey, p.Namespace, t.LabelSelector)
				}
			}
			if a.PodAntiAffinity != nil {
				for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					add(t.TopologyKey, p.Namespace, t.LabelSelector)
				}
			}
		}
	}
	return out
}

type nsSelector struct {
	namespace string
	selector  labels.Selector
}

// pinIfWatched pins the node's zone and capacity type, as soon as a pod lands on it that another pod's constraint
// on them counts.
func (st *solve) pinIfWatched(n *openNode, pod *corev1.Pod) {
	if st.watched == nil {
		st.watched = offeringSelectors(st.in.Pods)
	}
	before := len(n.pinned)
	saved := n.pods
	n.pods = []*corev1.Pod{pod}
	st.pinWatched(n, st.watched)
	n.pods = saved
	if len(n.pinned) != before {
		n.pricesDirty = true
	}
}

// pinWatched pins a node's zone and capacity type to the ones the solver assumed when any of its pods is counted
// by another pod's constraint on them: the plan holds only if the node really is where the solver put it.
func (st *solve) pinWatched(n *openNode, watched map[string][]nsSelector) {
	for key, sels := range watched {
		if n.pinned[key] {
			continue
		}
		value := n.zone
		if key == stevedorev1.LabelCapacityType {
			value = n.ct
		}
		for _, p := range n.pods {
			matched := false
			for _, s := range sels {
				if s.namespace == p.Namespace && s.selector.Matches(labels.Set(p.Labels)) {
					matched = true
					break
				}
			}
			if matched {
				pinned := make(map[string]bool, len(n.pinned)+1)
				for k := range n.pinned {
					pinned[k] = true
				}
				pinned[key] = true
				n.pinned = pinned
				n.reqs = n.reqs.Clone()
				n.reqs.Add(scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, value))
				break
			}
		}
	}
}

// planNode chooses the types that fit a node's pods and DaemonSet pods, cheapest first.
func (st *solve) planNode(n *openNode) *PlannedNode {
	all := append(append([]*corev1.Pod(nil), n.pods...), n.ds...)
	requests := podRequests(all)
	type priced struct {
		it *cloud.InstanceType
		o  cloud.Offering
	}
	var fits []priced
	for _, it := range n.candidates {
		if !fitsList(requests, it.Allocatable()) {
			continue
		}
		offers := it.Offerings.Compatible(n.reqs)
		if n.pinned[corev1.LabelTopologyZone] || n.pinned[stevedorev1.LabelCapacityType] {
			offers = Offerings(offers).only(n)
		}
		o, ok := cloud.Offerings(offers).Cheapest()
		if !ok {
			continue
		}
		fits = append(fits, priced{it, o})
	}
	if len(fits) == 0 {
		return nil
	}
	sort.SliceStable(fits, func(i, j int) bool {
		if fits[i].o.Price != fits[j].o.Price {
			return fits[i].o.Price < fits[j].o.Price
		}
		return fits[i].it.Name < fits[j].it.Name
	})
	pn := &PlannedNode{NodePool: n.pool.NodePool, Requirements: n.reqs.Clone(), InstanceType: fits[0].it, Offering: fits[0].o,
		Pods: n.pods, DaemonSets: n.ds, Requests: requests}
	for _, f := range fits {
		pn.InstanceTypes = append(pn.InstanceTypes, f.it)
	}
	return pn
}

// Offerings adds solver helpers to cloud offerings.
type Offerings cloud.Offerings

func (os Offerings) only(n *openNode) cloud.Offerings {
	var out cloud.Offerings
	for _, o := range os {
		if n.pinned[corev1.LabelTopologyZone] && o.Zone != n.zone {
			continue
		}
		if n.pinned[stevedorev1.LabelCapacityType] && o.CapacityType != n.ct {
			continue
		}
		out = append(out, o)
	}
	return out
}

// quantity renders a vec for messages.
func (v vec) String() string {
	return fmt.Sprintf("cpu %s, memory %s, pods %d", resource.NewMilliQuantity(v.cpu, resource.DecimalSI),
		resource.NewQuantity(v.mem, resource.BinarySI), v.pods)
}

// improve spends the time budget on moves that lower the plan's price: emptying a node into the slack of others,
// and moving single pods off a node when that lets it use a cheaper type and costs the receiving node less. Every
// move is checked like a first placement (Filter plugins, spread groups); a move that does not pay is undone.
func (st *solve) improve(deadline time.Time) {
	for pass := 0; pass < 4 && time.Now().Before(deadline); pass++ {
		improved := false
		for _, a := range st.byWaste() {
			if time.Now().After(deadline) {
				return
			}
			if a.removed || len(a.pods) == 0 {
				continue
			}
			if len(a.pods) <= 8 && st.tryEmpty(a) {
				improved = true
				continue
			}
			pods := append([]*corev1.Pod(nil), a.pods...)
			sort.Slice(pods, func(i, j int) bool { return podVec(pods[i]).weight() > podVec(pods[j]).weight() })
			for _, p := range pods {
				if st.tryMove(a, p) {
					improved = true
				}
			}
		}
		if !improved {
			return
		}
	}
}

// byWaste orders the open nodes by the share of their type they leave unused, most wasteful first.
func (st *solve) byWaste() []*openNode {
	type w struct {
		n     *openNode
		waste float64
	}
	var list []w
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		price, slack, idx := n.current()
		if math.IsInf(price, 1) || idx >= len(n.byPrice) {
			continue
		}
		list = append(list, w{n, slack.weight() / math.Max(n.byPrice[idx].alloc.weight(), 1e-9)})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].waste > list[j].waste })
	out := make([]*openNode, len(list))
	for i := range list {
		out[i] = list[i].n
	}
	return out
}

// saved is an open node's state before a move, to undo it.
type savedNode struct {
	n     *openNode
	state openNode
}

func (st *solve) save(saved map[*openNode]savedNode, n *openNode) {
	if _, ok := saved[n]; ok {
		return
	}
	cp := *n
	cp.pods = append([]*corev1.Pod(nil), n.pods...)
	saved[n] = savedNode{n: n, state: cp}
}

// unplace takes a pod off an open node (snapshot, groups, accounting).
func (st *solve) unplace(n *openNode, p *corev1.Pod) {
	labels := st.snap.NodeInfo(n.name).Node().Labels
	_ = st.snap.RemovePod(n.name, p)
	groupsUncount(st.groups, p, labels)
	for i, q := range n.pods {
		if q.UID == p.UID {
			n.pods = append(n.pods[:i], n.pods[i+1:]...)
			break
		}
	}
	n.used = n.used.sub(podVec(p))
	n.cacheValid = false
}

// restore undoes moves: pods placed on other nodes are taken off, node states put back, and the pods returned.
func (st *solve) restore(saved map[*openNode]savedNode, moved map[types.UID]*openNode) {
	for _, sv := range saved {
		for _, p := range sv.n.pods {
			if dst, ok := moved[p.UID]; ok && dst == sv.n {
				st.unplace(sv.n, p)
			}
		}
	}
	for _, sv := range saved {
		labels := st.snap.NodeInfo(sv.n.name).Node().Labels
		*sv.n = sv.state
		sv.n.pricesDirty, sv.n.cacheValid = true, false
		st.snap.NodeInfo(sv.n.name).SetNode(sv.n.node())
		_ = labels
	}
}

// tryEmpty moves every pod of a to other open nodes when that lowers the total price.
func (st *solve) tryEmpty(a *openNode) bool {
	saved := map[*openNode]savedNode{}
	st.save(saved, a)
	before, _, _ := a.current()
	pods := orderPods(a.pods)
	for _, p := range pods {
		st.unplace(a, p)
	}
	moved := map[types.UID]*openNode{}
	budget := before
	ok := true
	for _, p := range pods {
		dst := st.relocate(p, a, budget, saved)
		if dst == nil {
			ok = false
			break
		}
		moved[p.UID] = dst
	}
	if ok {
		after := 0.0
		for n, sv := range saved {
			if n == a {
				continue
			}
			pb, _, _ := (&sv.state).current()
			pa, _, _ := n.current()
			after += pa - pb
		}
		if after < before-1e-9 {
			a.removed = true
			st.snap.RemoveNode(a.name)
			return true
		}
	}
	// put everything back
	for uid, dst := range moved {
		for _, p := range dst.pods {
			if p.UID == uid {
				st.unplace(dst, p)
				break
			}
		}
	}
	for n, sv := range saved {
		*n = sv.state
		n.pricesDirty, n.cacheValid = true, false
		st.snap.NodeInfo(n.name).SetNode(n.node())
	}
	for _, p := range saved[a].state.pods {
		labels := st.snap.NodeInfo(a.name).Node().Labels
		_ = st.snap.AddPod(a.name, p)
		groupsCount(st.groups, p, labels)
	}
	return false
}

// tryMove moves one pod off a when a can then use a cheaper type and the receiving node grows by less.
func (st *solve) tryMove(a *openNode, p *corev1.Pod) bool {
	before, _, _ := a.current()
	saved := map[*openNode]savedNode{}
	st.save(saved, a)
	st.unplace(a, p)
	after, _, _ := a.current()
	gain := before - after
	if len(a.pods) == 0 {
		gain = before
	}
	if gain > 1e-9 {
		if dst := st.relocate(p, a, gain, saved); dst != nil {
			if len(a.pods) == 0 {
				a.removed = true
				st.snap.RemoveNode(a.name)
			}
			return true
		}
	}
	*a = saved[a].state
	a.pricesDirty, a.cacheValid = true, false
	labels := st.snap.NodeInfo(a.name).Node().Labels
	_ = st.snap.AddPod(a.name, p)
	groupsCount(st.groups, p, labels)
	return false
}

// relocate places p on an open node other than from whose price grows by less than budget, returning it.
func (st *solve) relocate(p *corev1.Pod, from *openNode, budget float64, saved map[*openNode]savedNode) *openNode {
	state, pre, status := st.sim.PreFilter(st.ctx, p)
	if !status.IsSuccess() && !status.IsSkip() {
		return nil
	}
	allowed := func(name string) bool { return pre.AllNodes() || pre.NodeNames.Has(name) }
	need := podVec(p)
	podReqs := podRequirements(p)
	cared := caredKeys(p)
	for _, g := range st.groups {
		if g.key != corev1.LabelHostname && g.matches(p) {
			cared[g.key] = true
		}
	}
	// remember the receiving node's state before it changes, so an unprofitable move can be undone
	st.beforeCommit = func(n *openNode) { st.save(saved, n) }
	defer func() { st.beforeCommit = nil }()
	if !st.placeOnOpenWith(p, state, need, podReqs, cared, allowed, placeOptions{exclude: from, maxMarginal: budget}) {
		return nil
	}
	for _, n := range st.open {
		if len(n.pods) > 0 && n.pods[len(n.pods)-1].UID == p.UID {
			return n
		}
	}
	return nil
}
