/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// spreadGroup tracks, for one hard topology spread constraint of the batch, how many matching pods each domain
// holds. The scheduler checks a spread constraint only when it schedules the pod that carries it; pods that merely
// match its selector are placed without regard to it. Since the order in which the scheduler will bind a batch's
// pods is not known, the solver keeps every constraint satisfied for any order: a pod that matches a group's
// selector may not make the group's skew exceed maxSkew, whether it carries the constraint or not.
//
// Domains and counts follow kube-scheduler's PodTopologySpread: a node is a domain of the constraint only if it
// has the topology key and, with nodeAffinityPolicy Honor (the default), matches the owning pod's node selector
// and required node affinity, and, with nodeTaintsPolicy Honor, has no taint the owner does not tolerate;
// matchLabelKeys narrow the selector to the owner's values; fewer domains than minDomains make the global
// minimum 0. Domains are the existing and in-flight nodes and every (NodePool, instance type, offering) a new node
// could be, so a zone with no node yet counts; for the hostname key a new node is always one more empty domain.
type spreadGroup struct {
	// id identifies the constraint: pods with the same constraint share the group
	id         string
	namespace  string
	selector   labels.Selector
	key        string
	maxSkew    int
	minDomains int
	// affinity is the owner's required node affinity (nil with nodeAffinityPolicy Ignore).
	affinity *nodeaffinity.RequiredNodeAffinity
	// tolerations of the owner, when nodeTaintsPolicy is Honor.
	honorTaints bool
	tolerations []corev1.Toleration
	counts      map[string]int
	// histogram counts the domains holding each number of matching pods, so the minimum is found quickly.
	histogram map[int]int
	// counted records where each counted pod was counted, so it is taken off the same domain.
	counted map[types.UID]string
	// poolCap, when positive, makes the group a workload's cap per Spot pool (package poolcap) rather than a
	// spread constraint: its domains are the Spot pools (instance type and zone), a node that may be Spot but whose
	// pool is not decided takes none of its pods, and a pool may hold at most poolCap of them.
	poolCap  int
	workload poolcap.Key
}

func (g *spreadGroup) matches(pod *corev1.Pod) bool {
	if pod.Namespace != g.namespace {
		return false
	}
	if g.poolCap > 0 {
		key, ok := poolcap.KeyOf(pod)
		return ok && key == g.workload
	}
	return g.selector.Matches(labels.Set(pod.Labels))
}

// domain returns the node's domain of the group, when it is one of its domains.
func (g *spreadGroup) domain(node *corev1.Node) (string, bool) {
	if g.poolCap > 0 {
		pool, kind := poolcap.PoolOf(node)
		return pool, kind == poolcap.Spot
	}
	if !g.eligible(node) {
		return "", false
	}
	return node.Labels[g.key], true
}

// eligible reports whether a node is one of the constraint's domains.
func (g *spreadGroup) eligible(node *corev1.Node) bool {
	if g.poolCap > 0 {
		_, kind := poolcap.PoolOf(node)
		return kind == poolcap.Spot
	}
	if _, ok := node.Labels[g.key]; !ok {
		return false
	}
	if g.affinity != nil {
		if ok, err := g.affinity.Match(node); err != nil || !ok {
			return false
		}
	}
	if g.honorTaints {
		for i := range node.Spec.Taints {
			t := &node.Spec.Taints[i]
			if t.Key == PhantomTaint || (t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute) {
				continue
			}
			tolerated := false
			for j := range g.tolerations {
				if g.tolerations[j].ToleratesTaint(klog.Background(), t, false) {
					tolerated = true
					break
				}
			}
			if !tolerated {
				return false
			}
		}
	}
	return true
}

func (g *spreadGroup) addDomain(d string) {
	if _, ok := g.counts[d]; ok {
		return
	}
	g.counts[d] = 0
	g.histogram[0]++
}

func (g *spreadGroup) removeDomain(d string) {
	c, ok := g.counts[d]
	if !ok {
		return
	}
	delete(g.counts, d)
	g.histogram[c]--
	if g.histogram[c] == 0 {
		delete(g.histogram, c)
	}
}

func (g *spreadGroup) increment(d string) {
	c, ok := g.counts[d]
	if !ok {
		g.addDomain(d)
	}
	g.histogram[c]--
	if g.histogram[c] == 0 {
		delete(g.histogram, c)
	}
	g.counts[d] = c + 1
	g.histogram[c+1]++
}

func (g *spreadGroup) decrement(d string) {
	c, ok := g.counts[d]
	if !ok || c == 0 {
		return
	}
	g.histogram[c]--
	if g.histogram[c] == 0 {
		delete(g.histogram, c)
	}
	g.counts[d] = c - 1
	g.histogram[c-1]++
}

func (g *spreadGroup) min() int {
	if g.poolCap > 0 || g.key == corev1.LabelHostname || len(g.counts) < g.minDomains {
		return 0
	}
	m := -1
	for c := range g.histogram {
		if m < 0 || c < m {
			m = c
		}
	}
	if m < 0 {
		return 0
	}
	return m
}

// allows reports whether one more matching pod in domain d keeps the skew within maxSkew (within the cap, for a
// cap per Spot pool).
func (g *spreadGroup) allows(d string) bool {
	if g.poolCap > 0 {
		return g.counts[d] < g.poolCap
	}
	return g.counts[d]+1-g.min() <= g.maxSkew
}

// newPoolCapGroup builds the group of a workload's cap per Spot pool, from one of its pods.
func newPoolCapGroup(owner *corev1.Pod, poolCap int) (*spreadGroup, string) {
	key, _ := poolcap.KeyOf(owner)
	g := &spreadGroup{namespace: owner.Namespace, poolCap: poolCap, workload: key,
		counts: map[string]int{}, histogram: map[int]int{}, counted: map[types.UID]string{}}
	g.id = fmt.Sprintf("poolcap|%s|%s|%s|%d", key.Namespace, key.Kind, key.Name, poolCap)
	return g, g.id
}

// newSpreadGroup builds the group of one constraint of owner.
func newSpreadGroup(owner *corev1.Pod, c corev1.TopologySpreadConstraint) (*spreadGroup, string, error) {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return nil, "", err
	}
	for _, k := range c.MatchLabelKeys {
		if v, ok := owner.Labels[k]; ok {
			r, err := labels.NewRequirement(k, selection.Equals, []string{v})
			if err != nil {
				return nil, "", err
			}
			sel = sel.Add(*r)
		}
	}
	g := &spreadGroup{namespace: owner.Namespace, selector: sel, key: c.TopologyKey, maxSkew: int(c.MaxSkew), minDomains: 1,
		counts: map[string]int{}, histogram: map[int]int{}, counted: map[types.UID]string{}}
	if c.MinDomains != nil {
		g.minDomains = int(*c.MinDomains)
	}
	id := fmt.Sprintf("%s|%s|%s|%d|%d", owner.Namespace, sel.String(), c.TopologyKey, c.MaxSkew, g.minDomains)
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		g.affinity = ptrTo(nodeaffinity.GetRequiredNodeAffinity(owner))
		var affinity *corev1.NodeSelector
		if a := owner.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		raw, _ := json.Marshal([]any{owner.Spec.NodeSelector, affinity})
		id += "|affinity=" + string(raw)
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		g.honorTaints, g.tolerations = true, owner.Spec.Tolerations
		raw, _ := json.Marshal(owner.Spec.Tolerations)
		id += "|tolerations=" + string(raw)
	}
	g.id = id
	return g, id, nil
}

func ptrTo[T any](v T) *T { return &v }

// spreadGroups collects the batch's hard spread constraints, their domains (existing and possible nodes) and the
// matching pods already in the snapshot.
//
//nolint:gocyclo // collects constraints, domains and matching pods of every hard spread in one pass over the batch and the snapshot
func spreadGroups(pods []*corev1.Pod, snap *simulation.Snapshot, possibleNodes func() []*corev1.Node) []*spreadGroup {
	byID := map[string]*spreadGroup{}
	var out []*spreadGroup
	for _, p := range pods {
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
				continue
			}
			g, id, err := newSpreadGroup(p, c)
			if err != nil {
				continue
			}
			if _, ok := byID[id]; !ok {
				byID[id] = g
				out = append(out, g)
			}
		}
		if poolCap, ok, _ := poolcap.Of(p); ok {
			if g, id := newPoolCapGroup(p, poolCap); byID[id] == nil {
				byID[id] = g
				out = append(out, g)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	nodes, _ := snap.List()
	for _, ni := range nodes {
		node := ni.Node()
		for _, g := range out {
			d, ok := g.domain(node)
			if !ok {
				continue
			}
			g.addDomain(d)
			for _, pi := range ni.GetPods() {
				if pod := pi.GetPod(); g.matches(pod) {
					g.increment(d)
					g.counted[pod.UID] = d
				}
			}
		}
	}
	for _, node := range possibleNodes() {
		for _, g := range out {
			if g.poolCap == 0 && g.key != corev1.LabelHostname && g.eligible(node) {
				g.addDomain(node.Labels[g.key])
			}
		}
	}
	return out
}

// possibleNodes renders one node per distinct set of labels a new node of the NodePools could have (each
// instance type in each of its offerings, each value of a key the NodePool lets take several), for the spread
// groups' domains.
func possibleNodes(pools []NodePoolOption, region string) []*corev1.Node {
	seen := map[string]bool{}
	var out []*corev1.Node
	for i := range pools {
		pool := &pools[i]
		for _, kl := range pool.labelSets(region).possible {
			if seen[kl.key] {
				continue
			}
			seen[kl.key] = true
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: kl.labels}, Spec: corev1.NodeSpec{Taints: pool.NodePool.Spec.Template.Spec.Taints}})
		}
	}
	return out
}

// ownGroups returns the groups of the pod's own hard constraints.
func ownGroups(groups []*spreadGroup, pod *corev1.Pod) []*spreadGroup {
	var out []*spreadGroup
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
			continue
		}
		_, id, err := newSpreadGroup(pod, c)
		if err != nil {
			continue
		}
		for _, g := range groups {
			if g.id == id {
				out = append(out, g)
			}
		}
	}
	for _, g := range groups {
		if g.poolCap > 0 && g.matches(pod) {
			out = append(out, g) // the pod's own cap, however it is set aside for others' spreads
		}
	}
	return out
}

// groupsAllow reports whether placing pod on node keeps every matching group within its skew.
func groupsAllow(groups []*spreadGroup, pod *corev1.Pod, node *corev1.Node) bool {
	for _, g := range groups {
		if !g.matches(pod) {
			continue
		}
		if g.poolCap > 0 {
			// a capped pod goes where its pool is known: on-demand, or Spot in a pool with room under the cap
			if pool, kind := poolcap.PoolOf(node); kind == poolcap.Undecided || (kind == poolcap.Spot && !g.allows(pool)) {
				return false
			}
			continue
		}
		if !g.eligible(node) {
			continue
		}
		if !g.allows(node.Labels[g.key]) {
			return false
		}
	}
	return true
}

// groupsCount records pod in the groups it matches.
func groupsCount(groups []*spreadGroup, pod *corev1.Pod, node *corev1.Node) {
	for _, g := range groups {
		if !g.matches(pod) {
			continue
		}
		d, ok := g.domain(node)
		if !ok {
			continue
		}
		g.increment(d)
		g.counted[pod.UID] = d
	}
}

// groupsUncount removes pod from the groups it was counted in.
func groupsUncount(groups []*spreadGroup, pod *corev1.Pod) {
	for _, g := range groups {
		if d, ok := g.counted[pod.UID]; ok {
			g.decrement(d)
			delete(g.counted, pod.UID)
		}
	}
}

// groupsAddNode registers a new node's domains (its hostname, and any new value of a group's key).
func groupsAddNode(groups []*spreadGroup, node *corev1.Node) {
	for _, g := range groups {
		if g.poolCap > 0 {
			continue // a pool is a domain once a pod is counted in it
		}
		if g.eligible(node) {
			g.addDomain(node.Labels[g.key])
		}
	}
}

// groupsRemoveNode forgets a node's hostname domain (a virtual node the solver gave up on).
func groupsRemoveNode(groups []*spreadGroup, node *corev1.Node) {
	for _, g := range groups {
		if g.key != corev1.LabelHostname {
			continue
		}
		if d, ok := node.Labels[g.key]; ok && g.counts[d] == 0 {
			g.removeDomain(d)
		}
	}
}
