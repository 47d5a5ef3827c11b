/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// The two PreFilter plugins whose state is a count over every pod of the cluster. Recomputing them for each pod
// the solver places makes a solve quadratic; instead their state is kept per pod class and updated as the
// snapshot changes (see incremental).
var incrementalPlugins = []string{names.PodTopologySpread, names.InterPodAffinity}

const (
	spreadStateKey   fwk.StateKey = "PreFilter" + names.PodTopologySpread
	affinityStateKey fwk.StateKey = "PreFilter" + names.InterPodAffinity
	generationKey    fwk.StateKey = "stevedore.dev/snapshot-generation"
)

// generation marks a cycle state lent from the incremental cache with the snapshot change it reflects.
type generation uint64

func (g generation) Clone() fwk.StateData { return g }

// incremental keeps the PodTopologySpread and InterPodAffinity PreFilter state of each pod class seen on one
// snapshot, and updates it as the snapshot tells of changes, so that PreFilter costs what changed since the class
// was last asked about instead of a walk over every node and pod.
//
// Both states are sums over nodes, which is what makes them exact to maintain:
//   - InterPodAffinity: counts of (topology key, value) pairs of matching pods. The plugin's own AddPod and
//     RemovePod extensions update them exactly; a relabelled node is its pods removed under the old labels and
//     added under the new.
//   - PodTopologySpread: per constraint, the number of matching pods in each domain of the eligible nodes (a
//     domain with no matching pod counts 0), and the two "critical paths" holding the minimum. The plugin's
//     AddPod keeps the counts exact but not the minimum (its critical paths are exact only for the one-node
//     changes of preemption), and a node added, removed or relabelled changes which domains exist. So a node's
//     change is applied as its contribution (the plugin's own PreFilter run on that node alone) taken away and
//     added, and the minimum is recomputed from the counts before the state is lent. When a domain's count
//     falls to zero it is not known whether another eligible node keeps the domain: the class is forgotten and
//     computed again when next asked for. The state's fields are reached by reflection on the names the plugin
//     exports for its tests; a build of the scheduler that renames them disables the cache (New fails).
//
// A state is lent, not copied: it is valid until the snapshot next changes, which the generation written beside
// it lets Filter check. Tests compare every lent state with a fresh one (Options.CheckIncremental).
type incremental struct {
	spread, affinity fwk.PreFilterPlugin
	classes          map[string]*classState
	// antiKeys counts, per topology key, the pods in the snapshot with a required anti-affinity term on it: a
	// relabel in one of those keys moves those pods' terms to another domain.
	antiKeys map[string]int
	// nodesWith counts, for the topology keys of the spread states, the nodes with each value: a domain whose
	// count falls to zero disappears for sure when its last node goes.
	nodesWith map[string]map[string]int
	// hostnameFastPath is the InterPodAffinityHostnameFastPath feature, which changes when InterPodAffinity skips
	// a pod.
	hostnameFastPath bool
	// computed counts class states computed from scratch; drops those forgotten because a change could not be
	// applied to them (computed again when next asked for).
	computed, drops int
}

// classState is the incremental state of one pod class: pods alike in everything the two plugins read.
type classState struct {
	pod    *v1.Pod
	cs     *framework.CycleState // holds the plugins' states under their own keys, for their extensions
	spread *spreadCounts         // nil: PodTopologySpread skips the class
	// affinityOn: InterPodAffinity keeps state for the class (else it skipped it).
	affinityOn bool
	// spreadKeys and affinityKeys are the node label keys each state depends on.
	spreadKeys, affinityKeys map[string]bool
}

// newIncremental returns the cache, or an error when the scheduler's plugin state does not have the shape it
// relies on.
func newIncremental(spread, affinity fwk.PreFilterPlugin) (*incremental, error) {
	inc := &incremental{spread: spread, affinity: affinity, classes: map[string]*classState{}, antiKeys: map[string]int{},
		nodesWith:        map[string]map[string]int{},
		hostnameFastPath: utilfeature.DefaultFeatureGate.Enabled(features.InterPodAffinityHostnameFastPath)}
	// probe the shape of the spread state with a one-constraint pod and no node
	probe := &v1.Pod{Spec: v1.PodSpec{TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1,
		TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule}}}}
	if _, err := inc.spreadContribution(context.Background(), probe, nil); err != nil {
		return nil, err
	}
	return inc, nil
}

// classKey is what the two plugins read of a pod: its namespace, labels, node selection, tolerations,
// affinity and spread constraints.
func classKey(pod *v1.Pod) (string, bool) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return "", false // volume plugins keep per-node state in the cycle state: not shared
		}
	}
	b, err := json.Marshal(struct {
		NS          string
		Labels      map[string]string
		Selector    map[string]string
		Affinity    *v1.Affinity
		Tolerations []v1.Toleration
		Spread      []v1.TopologySpreadConstraint
	}{pod.Namespace, pod.Labels, pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations, pod.Spec.TopologySpreadConstraints})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// class returns the state of pod's class, computing it when the class is new.
//
//nolint:gocyclo // computing a new class's state over the snapshot: one branch per plugin state it keeps
func (inc *incremental) class(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) (*classState, error) {
	key, ok := classKey(pod)
	if !ok {
		return nil, nil
	}
	if c, ok := inc.classes[key]; ok {
		if c.spread != nil && c.spread.pathsStale {
			c.spread.refreshPaths()
		}
		return c, nil
	}
	c := &classState{pod: pod, cs: framework.NewCycleState(), spreadKeys: scheduling.NodeSelectionKeys(pod), affinityKeys: map[string]bool{}}
	c.cs.SetRecordPluginMetrics(false)
	_, status := inc.spread.PreFilter(ctx, c.cs, pod, nodes)
	switch {
	case status.IsSkip():
	case !status.IsSuccess():
		return nil, status.AsError()
	default:
		data, err := c.cs.Read(spreadStateKey)
		if err != nil {
			return nil, err
		}
		sc, err := viewSpread(data)
		if err != nil {
			return nil, err
		}
		c.spread = sc
		sc.refreshPaths()
		for _, k := range sc.keys {
			c.spreadKeys[k] = true
			inc.track(k, nodes)
		}
	}
	// InterPodAffinity: computed over the snapshot once, then kept by its extensions
	_, status = inc.affinity.PreFilter(ctx, c.cs, pod, nodes)
	switch {
	case status.IsSkip():
	case !status.IsSuccess():
		return nil, status.AsError()
	default:
		c.affinityOn = true
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				c.affinityKeys[t.TopologyKey] = true
			}
		}
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				c.affinityKeys[t.TopologyKey] = true
			}
		}
	}
	inc.classes[key] = c
	inc.computed++
	return c, nil
}

// tried returns a copy of the state of pod's class with the changes tried since the snapshot was suspended
// applied, as the class would have it had it heard them; nil when that cannot be told (the class is new, a change
// is of a kind the copy does not follow, or the state cannot follow it) and PreFilter must run from scratch. A
// trial relabels one node and adds its DaemonSet pods: the copy costs what those change, not a walk over the
// snapshot.
func (inc *incremental) tried(ctx context.Context, pod *v1.Pod, changes []triedChange) *classState {
	key, ok := classKey(pod)
	if !ok {
		return nil
	}
	c := inc.classes[key]
	if c == nil {
		return nil
	}
	cp := c.clone()
	if cp == nil || inc.applyTried(ctx, cp, changes) != nil {
		return nil
	}
	if cp.spread != nil {
		cp.spread.refreshPaths()
	}
	return cp
}

// clone copies a class's state (nil if its shape is not the one expected).
func (c *classState) clone() *classState {
	if c.spread != nil && c.spread.pathsStale {
		c.spread.refreshPaths()
	}
	cs, ok := c.cs.Clone().(*framework.CycleState)
	if !ok {
		return nil
	}
	cp := &classState{pod: c.pod, cs: cs, affinityOn: c.affinityOn, spreadKeys: c.spreadKeys, affinityKeys: c.affinityKeys}
	if c.spread != nil {
		data, err := cs.Read(spreadStateKey)
		if err != nil {
			return nil
		}
		if cp.spread, err = viewSpread(data); err != nil {
			return nil
		}
		c.spread.cloneOrder(cp.spread)
	}
	return cp
}

// errTrial says the changes tried cannot be applied to a copy of a class's state.
var errTrial = errors.New("the changes tried are not ones a class state's copy follows")

// applyTried applies the changes tried to a copy of a class's state.
func (inc *incremental) applyTried(ctx context.Context, cp *classState, changes []triedChange) error {
	relabels, antiAdded := 0, false
	for _, ch := range changes {
		if ch.pod != nil {
			if ch.pod.GetPod().DeletionTimestamp != nil {
				return errTrial
			}
			antiAdded = antiAdded || len(ch.pod.GetRequiredAntiAffinityTerms()) > 0
			if err := inc.podClass(ctx, cp, nodeInfoWith(ch.node, nil), ch.pod, ch.sign); err != nil {
				return err
			}
			continue
		}
		changed := changedKeys(ch.old, ch.node)
		taintsChanged := !reflect.DeepEqual(ch.old.Spec.Taints, ch.node.Spec.Taints)
		if len(changed) == 0 && !taintsChanged {
			continue
		}
		// the node counts per domain (addContribution) are the snapshot's before the trial: right for one relabel
		if relabels++; relabels > 1 {
			return errTrial
		}
		rc := inc.relabel(ch.old, nodeInfoWith(ch.node, ch.pods), changed, taintsChanged)
		rc.anti = rc.anti || antiAdded
		if err := inc.relabelClass(ctx, cp, &rc); err != nil {
			return err
		}
	}
	return nil
}

// track starts counting the nodes per value of a topology key.
func (inc *incremental) track(key string, nodes []fwk.NodeInfo) {
	if _, ok := inc.nodesWith[key]; ok {
		return
	}
	counts := map[string]int{}
	for _, ni := range nodes {
		if v, ok := ni.Node().Labels[key]; ok {
			counts[v]++
		}
	}
	inc.nodesWith[key] = counts
}

// countNode adds (sign 1) or takes away a node from the tracked keys' counts.
func (inc *incremental) countNode(node *v1.Node, sign int) {
	for key, counts := range inc.nodesWith {
		if v, ok := node.Labels[key]; ok {
			counts[v] += sign
			if counts[v] <= 0 {
				delete(counts, v)
			}
		}
	}
}

// lend writes the class's states into a pod's cycle state (or marks the plugins skipped).
func (c *classState) lend(state fwk.CycleState, gen uint64) {
	skip := state.GetSkipFilterPlugins()
	if skip == nil {
		skip = sets.New[string]()
	}
	if c.spread != nil {
		state.Write(spreadStateKey, c.spread.state)
	} else {
		skip.Insert(names.PodTopologySpread)
	}
	if c.affinityOn {
		data, _ := c.cs.Read(affinityStateKey)
		state.Write(affinityStateKey, data)
	} else {
		skip.Insert(names.InterPodAffinity)
	}
	state.SetSkipFilterPlugins(skip)
	state.Write(generationKey, generation(gen))
}

// spreadContribution runs PodTopologySpread's PreFilter for pod on the given nodes alone and returns its counts.
func (inc *incremental) spreadContribution(ctx context.Context, pod *v1.Pod, nodes []fwk.NodeInfo) ([]map[string]int, error) {
	cs := framework.NewCycleState()
	cs.SetRecordPluginMetrics(false)
	if _, status := inc.spread.PreFilter(ctx, cs, pod, nodes); !status.IsSuccess() {
		return nil, fmt.Errorf("PodTopologySpread PreFilter: %w", status.AsError())
	}
	data, err := cs.Read(spreadStateKey)
	if err != nil {
		return nil, err
	}
	sc, err := viewSpread(data)
	if err != nil {
		return nil, err
	}
	return sc.matchNum, nil
}

// errDomainMayVanish says a node's counts were taken away from a domain left with none: whether the domain still
// has an eligible node is not known.
var errDomainMayVanish = fmt.Errorf("a spread domain may have lost its last node")

// addContribution adds (sign 1) or takes away (sign -1) one node's counts and domain.
func (inc *incremental) addContribution(ctx context.Context, c *classState, ni fwk.NodeInfo, sign int) error {
	sc := c.spread
	if sign > 0 && len(ni.GetPods()) == 0 {
		// an empty node in domains that exist already adds nothing; one without every key is not eligible
		known := true
		for i, k := range sc.keys {
			v, ok := ni.Node().Labels[k]
			if !ok {
				return nil
			}
			if _, ok := sc.matchNum[i][v]; !ok {
				known = false
			}
		}
		if known {
			return nil
		}
	}
	counts, err := inc.spreadContribution(ctx, c.pod, []fwk.NodeInfo{ni})
	if err != nil {
		return err
	}
	for i, m := range counts {
		for v, n := range m {
			was := sc.countOf(i, v)
			sc.matchNum[i][v] += sign * n
			if sign < 0 && sc.matchNum[i][v] <= 0 {
				if inc.nodesWith[sc.keys[i]][v] != 1 {
					sc.moved(i, was)
					return errDomainMayVanish
				}
				delete(sc.matchNum[i], v) // the node going was the domain's only one
			}
			sc.moved(i, was)
		}
	}
	return nil
}

// drop forgets a class; it is computed again when next asked for.
func (inc *incremental) drop(key string) {
	delete(inc.classes, key)
	inc.drops++
}

// ---- the snapshot's changes ----

func (inc *incremental) reset() {
	inc.classes = map[string]*classState{}
	inc.nodesWith = map[string]map[string]int{}
}

func (inc *incremental) nodeAdded(ni fwk.NodeInfo) {
	inc.countNode(ni.Node(), 1)
	ctx := context.Background()
	for key, c := range inc.classes {
		if c.spread != nil {
			if err := inc.addContribution(ctx, c, ni, 1); err != nil {
				inc.drop(key)
			}
		}
	}
}

func (inc *incremental) nodeRemoving(ni fwk.NodeInfo) {
	ctx := context.Background()
	for key, c := range inc.classes {
		if c.spread != nil {
			if err := inc.addContribution(ctx, c, ni, -1); err != nil {
				inc.drop(key)
				continue
			}
		}
		if c.affinityOn {
			for _, pi := range ni.GetPods() {
				if st := inc.affinity.PreFilterExtensions().RemovePod(ctx, c.cs, c.pod, pi, ni); !st.IsSuccess() {
					inc.drop(key)
					break
				}
			}
		}
	}
	for _, pi := range ni.GetPods() {
		inc.countAntiKeys(pi, -1)
	}
	inc.countNode(ni.Node(), -1)
}

func (inc *incremental) nodeChanged(ni fwk.NodeInfo, old *v1.Node) {
	changed := changedKeys(old, ni.Node())
	taintsChanged := !reflect.DeepEqual(old.Spec.Taints, ni.Node().Spec.Taints)
	if len(changed) == 0 && !taintsChanged {
		return
	}
	ctx := context.Background()
	rc := inc.relabel(old, ni, changed, taintsChanged)
	for key, c := range inc.classes {
		if inc.relabelClass(ctx, c, &rc) != nil {
			inc.drop(key)
		}
	}
	inc.countNode(old, -1)
	inc.countNode(ni.Node(), 1)
}

// relabelling is one node's relabel, as every class's state takes it in (relabelClass).
type relabelling struct {
	old           *v1.Node
	ni            fwk.NodeInfo
	changed       map[string]bool
	taintsChanged bool
	// anti: a changed key is the topology key of some pod's required anti-affinity term.
	anti bool
	// before is the node as it was, with its pods (made when first needed).
	before *framework.NodeInfo
}

func (inc *incremental) relabel(old *v1.Node, ni fwk.NodeInfo, changed map[string]bool, taintsChanged bool) relabelling {
	rc := relabelling{old: old, ni: ni, changed: changed, taintsChanged: taintsChanged}
	for k := range changed {
		if inc.antiKeys[k] > 0 {
			rc.anti = true
		}
	}
	return rc
}

// relabelClass moves a relabelled node's pods from their old domains to their new ones in one class's state; an
// error means the state cannot follow (it is computed again).
func (inc *incremental) relabelClass(ctx context.Context, c *classState, rc *relabelling) error {
	if c.spread != nil && (rc.taintsChanged || anyKey(rc.changed, c.spreadKeys)) {
		if rc.before == nil {
			rc.before = nodeInfoAs(rc.old, rc.ni)
		}
		if err := inc.addContribution(ctx, c, rc.before, -1); err != nil {
			return err
		}
		if err := inc.addContribution(ctx, c, rc.ni, 1); err != nil {
			return err
		}
	}
	if c.affinityOn && len(rc.ni.GetPods()) > 0 && (rc.anti || anyKey(rc.changed, c.affinityKeys)) {
		if rc.before == nil {
			rc.before = nodeInfoAs(rc.old, rc.ni)
		}
		ext := inc.affinity.PreFilterExtensions()
		for _, pi := range rc.ni.GetPods() {
			if st := ext.RemovePod(ctx, c.cs, c.pod, pi, rc.before); !st.IsSuccess() {
				return st.AsError()
			}
			if st := ext.AddPod(ctx, c.cs, c.pod, pi, rc.ni); !st.IsSuccess() {
				return st.AsError()
			}
		}
	}
	return nil
}

func (inc *incremental) podAdded(ni fwk.NodeInfo, pi fwk.PodInfo) {
	inc.podChanged(ni, pi, 1)
}

func (inc *incremental) podRemoved(ni fwk.NodeInfo, pi fwk.PodInfo) {
	inc.podChanged(ni, pi, -1)
}

func (inc *incremental) podChanged(ni fwk.NodeInfo, pi fwk.PodInfo, sign int) {
	if pi.GetPod().DeletionTimestamp != nil {
		// PreFilter does not count terminating pods but the extensions would: forget everything
		for key := range inc.classes {
			inc.drop(key)
		}
		return
	}
	inc.countAntiKeys(pi, sign)
	ctx := context.Background()
	for key, c := range inc.classes {
		if inc.podClass(ctx, c, ni, pi, sign) != nil {
			inc.drop(key)
		}
	}
}

// errSkipMayEnd says a pod joining the snapshot may make InterPodAffinity stop skipping a class.
var errSkipMayEnd = errors.New("InterPodAffinity may no longer skip the class")

// podClass adds (sign 1) or removes a pod in one class's state; an error means the state cannot follow (it is
// computed again).
func (inc *incremental) podClass(ctx context.Context, c *classState, ni fwk.NodeInfo, pi fwk.PodInfo, sign int) error {
	if sc := c.spread; sc != nil && c.pod.Namespace == pi.GetPod().Namespace {
		// the plugin counts the pod in the node's domain of each constraint, if anywhere
		var few [4]domainCount
		was := few[:0]
		for i, k := range sc.keys {
			was = append(was, sc.countOf(i, ni.Node().Labels[k]))
		}
		st := applyPod(ctx, inc.spread, c, pi, ni, sign)
		for i, w := range was {
			if _, ok := ni.Node().Labels[sc.keys[i]]; ok {
				sc.moved(i, w)
			}
		}
		if !st.IsSuccess() {
			return st.AsError()
		}
	}
	switch {
	case c.affinityOn:
		if st := applyPod(ctx, inc.affinity, c, pi, ni, sign); !st.IsSuccess() {
			return st.AsError()
		}
	case sign > 0 && len(pi.GetRequiredAntiAffinityTerms()) > 0 && inc.mayStopSkipping(c, pi):
		// the plugin skipped the class because no pod's required anti-affinity matched it; one may now
		return errSkipMayEnd
	}
	return nil
}

// mayStopSkipping reports whether a pod joining the snapshot can make InterPodAffinity stop skipping a class it
// skipped. The plugin skips a pod with no affinity terms of its own when no existing pod's required
// anti-affinity term matches it; so only a joining pod whose term matches the class's pod changes that. With the
// InterPodAffinityHostnameFastPath feature, any pod with a hostname-scoped term does, and a term with a namespace
// selector needs the namespace's labels: both answer yes.
func (inc *incremental) mayStopSkipping(c *classState, pi fwk.PodInfo) bool {
	if inc.hostnameFastPath {
		return true
	}
	if a := pi.GetPod().Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.NamespaceSelector != nil {
				return true
			}
		}
	}
	for _, t := range pi.GetRequiredAntiAffinityTerms() {
		if t.Matches(c.pod, nil) {
			return true
		}
	}
	return false
}

// applyPod adds (sign 1) or removes a pod to a class's state through the plugin's extension.
func applyPod(ctx context.Context, pl fwk.PreFilterPlugin, c *classState, pi fwk.PodInfo, ni fwk.NodeInfo, sign int) *fwk.Status {
	if sign > 0 {
		return pl.PreFilterExtensions().AddPod(ctx, c.cs, c.pod, pi, ni)
	}
	return pl.PreFilterExtensions().RemovePod(ctx, c.cs, c.pod, pi, ni)
}

func (inc *incremental) countAntiKeys(pi fwk.PodInfo, sign int) {
	for _, t := range pi.GetRequiredAntiAffinityTerms() {
		inc.antiKeys[t.TopologyKey] += sign
		if inc.antiKeys[t.TopologyKey] <= 0 {
			delete(inc.antiKeys, t.TopologyKey)
		}
	}
}

// changedKeys are the label keys whose value differs between two node objects (added or removed included).
func changedKeys(a, b *v1.Node) map[string]bool {
	out := map[string]bool{}
	for k, v := range b.Labels {
		if old, ok := a.Labels[k]; !ok || old != v {
			out[k] = true
		}
	}
	for k := range a.Labels {
		if _, ok := b.Labels[k]; !ok {
			out[k] = true
		}
	}
	return out
}

func anyKey(changed, keys map[string]bool) bool {
	for k := range changed {
		if keys[k] {
			return true
		}
	}
	return false
}

// nodeInfoAs is a NodeInfo of node with ni's pods.
func nodeInfoAs(node *v1.Node, ni fwk.NodeInfo) *framework.NodeInfo {
	return nodeInfoWith(node, ni.GetPods())
}

// nodeInfoWith is a NodeInfo of node with pods.
func nodeInfoWith(node *v1.Node, pods []fwk.PodInfo) *framework.NodeInfo {
	out := framework.NewNodeInfo()
	out.SetNode(node)
	for _, pi := range pods {
		out.AddPodInfo(pi)
	}
	return out
}
