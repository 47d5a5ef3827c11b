/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/resources"
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
	// Quotas are the ceilings shared with other NodePools that cover this one's nodes (CapacityQuotas).
	Quotas []*Quota
	// DaemonSetPods are one pod per DaemonSet of the cluster; those that would run on a new node are counted on it.
	DaemonSetPods []*corev1.Pod

	// MinValuesBestEffort plans nodes whose instance types cannot meet a requirement's minValues instead of leaving
	// their pods unschedulable (the plugin argument minValuesPolicy: BestEffort).
	MinValuesBestEffort bool

	// typeKeys are the label keys, beyond the well-known ones, that some instance type defines.
	typeKeys map[string]bool
	// zoneIDs maps the zones of the instance types' offerings to their IDs.
	zoneIDs scheduling.ZoneIDs
	// daemonKeys are the node label keys the DaemonSets select on; daemons caches which DaemonSet pods run on a
	// node, by the node's values of those keys.
	daemonKeys   []string
	daemons      map[string]daemonSetsOnNode
	hasMinValues bool
	// hasPlainTypes is true when some instance type has no GPU or Neuron device.
	hasPlainTypes bool

	byPrice []pricedType
	// maxCapacity is the largest capacity of any instance type, per limited resource (computed once).
	maxCapacity map[corev1.ResourceName]float64
	// maxLimitUnits is the same in limitUnits, exact (maxUnits).
	maxLimitUnits map[corev1.ResourceName]int64
	// labelCache holds the label sets of the NodePool's possible new nodes (labelSets), shared by the option's copies.
	labelCache *poolLabelSets
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
	// TimeBudget bounds the improvement phase, counted from the end of the greedy phase; 0 means greedy only.
	TimeBudget time.Duration
	// Region labels the virtual nodes (topology.kubernetes.io/region).
	Region string
	// FirstFitDecreasing replaces the price-aware placement by plain first-fit decreasing (largest pods first,
	// each on the first open node that takes it), the baseline the solver is measured against.
	FirstFitDecreasing bool
	// CheckCandidates compares the open nodes every placement takes from the kept per-shape lists with those a scan
	// of every open node finds, and records the differences in Plan.CandidateMismatches (tests).
	CheckCandidates bool
	// Gangs are the all-or-nothing groups among Pods (gangs.go).
	Gangs []Gang
	// Unavailable says, for each NodePool left out of NodePools because it cannot launch now (its EC2NodeClass not
	// ready, its instance types not read), why: each pod no NodePool takes is told.
	Unavailable []string
}

// Plan is the solver's answer.
type Plan struct {
	NewNodes []*PlannedNode
	// InFlight assigns pods to in-flight nodes, by node name.
	InFlight map[string][]*corev1.Pod
	// Unschedulable says why a pod got no node, by pod UID.
	Unschedulable map[types.UID]string
	// Cost is the hourly price of the new nodes; GreedyCost what they cost after the greedy placement, before the
	// improvement phase (Input.TimeBudget).
	Cost, GreedyCost float64
	// Duration of the solve.
	Duration time.Duration
	// Improvement says what the improvement phase did.
	Improvement Improvement
	// Attempts is how many times the greedy placement ran: once, plus the repair rounds and restarts of a batch
	// it left pods unschedulable in.
	Attempts int
	// CandidateMismatches are the differences Input.CheckCandidates found.
	CandidateMismatches []string
	// QuotasReached names the quotas that kept a node from opening or growing, with the first resource that did.
	QuotasReached map[string]corev1.ResourceName
}

// Improvement is what the improvement phase did: the moves it tried and its passes over the open nodes, and
// whether the time budget, a safety stop, ended it before its work bound did (then the plan depends on the
// machine's speed).
type Improvement struct {
	Moves, Passes int
	Duration      time.Duration
	TimedOut      bool
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
	// mismatches collects what Input.CheckCandidates finds in every attempt of a solve.
	mismatches []string
}

// NewSolver returns a solver using sim (whose snapshot becomes each Input's).
func NewSolver(sim *simulation.Simulator) *Solver { return &Solver{sim: sim} }

type solve struct {
	// What the attempt was given, and what it derives from that once: none of these change while it runs.
	ctx        context.Context
	in         Input
	sim        *simulation.Simulator
	snap       *simulation.Snapshot
	mismatches *[]string // what Input.CheckCandidates finds (the Solver's, across attempts)
	// rng, when set, shuffles the ways to place each pod (a randomised restart of a small batch).
	rng *rand.Rand
	// beforeCommit, when set, sees an open node just before a placement changes it.
	beforeCommit func(*openNode)
	// zoneIDs maps the zones of every NodePool's offerings to their IDs: a pod's requirement on the zone ID is read
	// as one on the zone.
	zoneIDs scheduling.ZoneIDs
	// affinityTargets are the selectors of every required pod affinity term with their topology keys, by
	// selector, key and namespace; antiKeys the topology keys of required anti-affinity terms.
	affinityTargets map[string]affinityTarget
	antiKeys        map[string]bool
	// daemonKeys are the label keys DaemonSets select on that no instance type decides: a node's value must be
	// pinned to know which DaemonSets run on it.
	daemonKeys []string
	// hasPreferNoSchedule is set when some NodePool has a PreferNoSchedule taint (all of them in
	// preferNoScheduleTaints): pods that do not tolerate it use such a NodePool last.
	hasPreferNoSchedule    bool
	preferNoScheduleTaints []corev1.Taint

	// The plan being built: every decision of the attempt is in these.
	plan    *Plan
	reasons map[types.UID]string // why each pod left out could not be placed
	// open are the new nodes planned so far; inflight the nodes being launched, with the room left on them.
	open     []*openNode
	inflight []*inflightState
	nextID   int
	// budgets are what the NodePools' limits and the quotas still allow, with the sums of the open nodes;
	// reservedUsed counts the planned nodes priced at each reservation's offering (finish).
	budgets      budgets
	reservedUsed map[string]int
	// committedUsed sums what the planned nodes priced at a commitment's covered offering use of it (finish).
	committedUsed map[string]float64
	// groups are the hard spread constraints of the batch, with their domains' counts; watchers the constraints
	// that count other pods by label (a pod they match lands on a node whose value of the key is known).
	groups   []*spreadGroup
	watchers []watcher
	// phantoms are the nodes standing for domains with no node yet (addPhantoms).
	phantoms []*corev1.Node
	// fragile are the placed pods whose required affinity holds only by selecting themselves (affinity.go).
	fragile []fragileAffinity
	// companions maps a pod to the stranded pod whose required affinity it is placed for: the pod goes where the
	// companion can follow, keeping room for it, and the companion is placed right after it.
	companions map[types.UID]*corev1.Pod

	// The attempt's parts that keep pod affinities true, choose offerings and list candidate nodes (each over
	// this state).
	affinities podAffinities
	offers     offeringChooser
	lists      candidateLists

	// Caches of what the input and the plan decide, each kept true as its invariant says: dropping one would change
	// no decision, only the time the attempt takes.
	solveCaches
	// Scratch space reused from one placement to the next: nothing in it outlives the call that fills it.
	solveScratch
}

// solveCaches are an attempt's caches. Each is filled on first use.
type solveCaches struct {
	// narrowMemo memoises narrowed by candidate list, NodePool, requirements and pinned offering; largestMemo
	// largestOf by candidate list. Invariant: the lists are interned and never changed once made, and the key holds
	// a pointer into the list's array, so a key names one list for the attempt's life.
	narrowMemo  map[narrowKey][]*cloud.InstanceType
	largestMemo map[listKey]*cloud.InstanceType
	// compatible memoises compatibleTypes per NodePool and requirements; fresh the starting types of new nodes
	// (freshTypes) per compatible list (itself one per NodePool and requirements) and room. Invariant: they read only
	// the input (NodePools and their types, which do not change during the attempt), never the plan.
	compatible map[*NodePoolOption]map[string][]*cloud.InstanceType
	fresh      map[freshKey]*freshTypes
	// offerMemo memoises cheapestFor for types without reserved offerings. Invariant: only those are kept, whose
	// answer does not depend on how much of a reservation the plan has used.
	offerMemo map[offerKey]offerMemo
	// prices shares the open nodes' price-ordered candidate lists (priceLists). Invariant: a list is never changed
	// once made; a node whose candidates or pins change takes another.
	prices priceLists
	// memoRing lists the nodes keeping offering choices, memoNext the next to forget (remember); segments holds the
	// choices alike nodes share (sharedSegments). Invariant: a node's choices are dropped whenever a pod joins it,
	// and segments is keyed by everything choiceSegments reads.
	memoRing []*openNode
	memoNext int
	segments map[segmentKey][][]offeringChoice
	// witnesses remembers, per selector and domain, a pod othersInDomain found there. Invariant: none; a witness is
	// trusted only after checking that it is still on a node of the domain.
	witnesses map[witnessKey]witness
	// shapes keeps the best open nodes per placement shape; changes logs the open nodes changed (touch), from which
	// they are brought up to date (candidates.go). Invariant: every change to an open node's room, price or
	// offerings goes through touch, so a shape is current once it has read changes to the end.
	shapes  map[placeShape]*shapeCands
	changes []*openNode
}

// solveScratch is an attempt's scratch space.
type solveScratch struct {
	// candBuf, bucketBuf and bucketIDs serve placeOnOpenWith's candidates and its per-offering buckets (bucketOf).
	candBuf   []openCand
	bucketBuf [][]openCand
	bucketIDs map[[2]string]int
	// nodeSlab holds the open nodes, allocated together (newOpenNode); a node taken back (freeOpenNode) is reused.
	nodeSlab []openNode
}

type inflightState struct {
	InFlightNode
	free vec
}

// Solve places in.Pods. Pods are taken hardest first (see orderPods); when that greedy order leaves pods
// unschedulable, the solve starts over with those pods first, up to maxRepairRounds times, and the plan that
// places the most pods (then the cheapest) is kept: a pod is left unschedulable only when no order tried found it
// a node. A gang (Input.Gangs) is planned whole or not at all. The same input always gives the same plan.
func (s *Solver) Solve(ctx context.Context, in Input) (*Plan, error) {
	if len(in.Gangs) > 0 {
		return s.solveGangs(ctx, in)
	}
	return s.solveOnce(ctx, in)
}

// solveOnce plans the input's pods, gangs left aside.
func (s *Solver) solveOnce(ctx context.Context, in Input) (*Plan, error) {
	start := time.Now()
	s.mismatches = nil
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
		sort.SliceStable(order, func(i, j int) bool { return resources.Pod(order[i]).Weight() > resources.Pod(order[j]).Weight() })
	}
	phantoms := s.newSolve(ctx, in).addPhantoms()
	defer func() {
		names := make([]string, 0, len(phantoms))
		for _, node := range phantoms {
			names = append(names, node.Name)
		}
		in.Snapshot.RemoveNodes(names...)
	}()
	st, err := s.search(ctx, in, pods, order, phantoms)
	if err != nil {
		return nil, err
	}
	greedy := st.cost()
	if in.TimeBudget > 0 {
		// the improvement phase has its own budget, counted from the end of the greedy phase: a large batch
		// whose greedy placement took longer than the budget is still improved
		st.plan.Improvement = improver{st}.improve(time.Now().Add(in.TimeBudget))
	}
	st.finish()
	st.plan.GreedyCost = greedy
	st.plan.Duration = time.Since(start)
	st.plan.CandidateMismatches, s.mismatches = s.mismatches, nil
	return st.plan, nil
}

// search runs the greedy placement in order, and, when it leaves pods unschedulable (or, for a small batch,
// breaks a constraint), repair rounds and restarts (repair.go); it returns the best attempt, placed in the
// snapshot.
//
//nolint:gocyclo // the search loop: greedy pass, repair rounds, restarts and the best-attempt bookkeeping read together
func (s *Solver) search(ctx context.Context, in Input, pods, order []*corev1.Pod, phantoms []*corev1.Node) (*solve, error) {
	attempts, existing := 0, in.Snapshot.Len()
	run := func(a attempt) (*solve, error) {
		attempts++
		st := s.newSolve(ctx, in)
		st.companions, st.phantoms = a.companions, phantoms
		if a.seed != 0 {
			st.rng = rand.New(rand.NewPCG(a.seed, 1)) //nolint:gosec // G404: a seeded, reproducible search order, not a secret
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
			err := restart(ctx, pods, order, existing, func() bool { return bestScore.bad <= floor }, func(a attempt) (bool, error) {
				before := bestScore
				err := try(a)
				return bestScore.better(before), err
			})
			if err != nil {
				return nil, err
			}
		}
		if !sameAttempt(last, best) {
			st.undo()
			if st, err = run(best); err != nil {
				return nil, err
			}
		}
	}
	st.plan.Attempts = attempts
	return st, nil
}

// newSolve prepares one attempt at placing the input's pods.
func (s *Solver) newSolve(ctx context.Context, in Input) *solve {
	st := &solve{ctx: ctx, in: in, sim: s.sim, snap: in.Snapshot, mismatches: &s.mismatches,
		plan:    &Plan{InFlight: map[string][]*corev1.Pod{}, Unschedulable: map[types.UID]string{}},
		reasons: map[types.UID]string{}}
	st.budgets = budgets{pools: in.NodePools, plan: st.plan}
	st.affinities, st.offers, st.lists = podAffinities{st}, offeringChooser{st}, candidateLists{st}
	for _, f := range in.InFlight {
		ni := in.Snapshot.NodeInfo(f.Name)
		if ni == nil {
			continue
		}
		st.inflight = append(st.inflight, &inflightState{InFlightNode: f, free: resources.Free(ni)})
	}
	st.sortInFlight()
	keys := map[string]bool{}
	st.zoneIDs = scheduling.ZoneIDs{}
	for i := range in.NodePools {
		pool := &in.NodePools[i]
		maps.Copy(st.zoneIDs, pool.zoneIDs)
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
		st.groups = spreadGroups(st.in.Pods, st.snap, func() []*corev1.Node { return possibleNodes(st.in.NodePools, st.in.Region) })
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

// touch records that an open node's pods, candidates or removal changed.
func (st *solve) touch(n *openNode) {
	st.budgets.dirty = append(st.budgets.dirty, n)
	st.changes = append(st.changes, n)
}
