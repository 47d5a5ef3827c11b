/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package freeroom

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// A spread group is what one hard topology spread constraint counts: the pods of a namespace its selector (with
// its matchLabelKeys) matches, by the value of its topology key on the node each is bound to. The index counts the
// pods of the groups asked about (SpreadAllows) as they bind and leave, so that a pod planned on a node can be held
// until binding it there keeps its constraints within their skew: released before, the scheduler refuses it
// (PodTopologySpread) in a cycle that costs a status write and an event, and tries it again each time a pod of
// its group binds.

// spreadGroup counts the pods of one group by domain: those bound (or reserved, which the scheduler counts too),
// and those released by SpreadAllows and not bound yet.
type spreadGroup struct {
	namespace, key string
	selector       labels.Selector
	counts, sent   map[string]int
}

// spreadConstraint is one hard constraint of a pod, with its group's identity.
type spreadConstraint struct {
	id         string
	key        string
	selector   labels.Selector
	maxSkew    int
	minDomains int
	self       int
}

// hardConstraints returns the pod's DoNotSchedule topology spread constraints, each with the id of its group.
func hardConstraints(pod *corev1.Pod) []spreadConstraint {
	var out []spreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			continue
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				if r, err := labels.NewRequirement(k, selection.In, []string{v}); err == nil {
					sel = sel.Add(*r)
				}
			}
		}
		sc := spreadConstraint{id: strings.Join([]string{pod.Namespace, c.TopologyKey, sel.String()}, "|"), key: c.TopologyKey,
			selector: sel, maxSkew: int(c.MaxSkew), minDomains: 1}
		if c.MinDomains != nil {
			sc.minDomains = int(*c.MinDomains)
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			sc.self = 1
		}
		out = append(out, sc)
	}
	return out
}

// SpreadAllows reports whether the pod, bound to node now, would keep each of its hard topology spread constraints
// within its maxSkew whatever the order the pods released before bind in, and which groups held it (their ids) with
// why. It counts as PodTopologySpread does (the pods bound and reserved, on the nodes that carry the constraint's
// topology key and match the pod's required node affinity; taints ignored, the constraints' default inclusion
// policies), with the pods released to the node's domain and not bound yet counted there, and those released to the
// other domains not. A pod allowed counts as released to node's domain until it is bound, deleted, given back
// (Unsend) or sentTTL passes: the pods planned on one node are released together when it is ready, and each must see
// the others. A node the index does not know, or that lacks a topology key, is left to the scheduler.
func (x *Index) SpreadAllows(pod *corev1.Pod, node string) (groups []string, why string) {
	constraints := hardConstraints(pod)
	if len(constraints) == 0 {
		return nil, ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unsendSpreadLocked(pod.UID)
	x.expireLocked()
	groups, whys, taken := x.spreadLocked(pod, node, constraints)
	if len(groups) > 0 {
		return groups, "binding it now would break its topology spread (" + strings.Join(whys, "; ") + ")"
	}
	for id, domain := range taken {
		x.groups[id].sent[domain]++
	}
	if len(taken) > 0 {
		x.sentSpread[pod.UID] = sentSpread{domains: taken, at: x.clock.Now()}
	}
	return nil, ""
}

// SpreadMayAllow is SpreadAllows without its effects: whether a pod held for its spread would be released now.
func (x *Index) SpreadMayAllow(pod *corev1.Pod, node string) bool {
	constraints := hardConstraints(pod)
	if len(constraints) == 0 {
		return true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	groups, _, _ := x.spreadLocked(pod, node, constraints)
	return len(groups) == 0
}

// spreadLocked weighs a pod's constraints on a node: the groups that hold it (with why), and else the domain it
// would count in, by group.
func (x *Index) spreadLocked(pod *corev1.Pod, node string, constraints []spreadConstraint) (groups, whys []string, taken map[string]string) {
	n := x.nodes[node]
	if n == nil || n.node == nil {
		return nil, nil, nil
	}
	taken = map[string]string{}
	for _, c := range constraints {
		domain, ok := n.node.Labels[c.key]
		if !ok {
			continue
		}
		// the pods released to this domain may bind before this one, and those released to the others after it
		g := x.groupLocked(pod.Namespace, c)
		least := x.leastLocked(pod, g, c, constraints)
		if here := g.counts[domain] + g.sent[domain]; here+c.self-least > c.maxSkew {
			groups = append(groups, c.id)
			whys = append(whys, fmt.Sprintf("%d pods of its spread group in %s %s, %d in the least", here, c.key, domain, least))
		} else if c.self == 1 {
			taken[c.id] = domain
		}
	}
	return groups, whys, taken
}

// sentSpread is where a pod released by SpreadAllows counts, by group, until it is bound.
type sentSpread struct {
	domains map[string]string
	at      time.Time
}

// unsendSpreadLocked takes a pod sent by SpreadAllows out of the counts.
func (x *Index) unsendSpreadLocked(uid types.UID) {
	s, ok := x.sentSpread[uid]
	if !ok {
		return
	}
	delete(x.sentSpread, uid)
	for id, domain := range s.domains {
		x.groups[id].sent[domain]--
		x.changed[id] = true
	}
}

// groupLocked returns the group of a constraint, counted from the pods bound now the first time it is asked for.
func (x *Index) groupLocked(namespace string, c spreadConstraint) *spreadGroup {
	if g := x.groups[c.id]; g != nil {
		return g
	}
	g := &spreadGroup{namespace: namespace, key: c.key, selector: c.selector, counts: map[string]int{}, sent: map[string]int{}}
	x.groups[c.id] = g
	for _, b := range x.bound {
		x.countLocked(b, c.id, g)
	}
	return g
}

// recountLocked puts a bound pod in the groups it belongs to now, and takes it out of the others.
func (x *Index) recountLocked(b *boundPod) {
	if b == nil {
		return
	}
	for id, g := range x.groups {
		x.countLocked(b, id, g)
	}
}

// countLocked counts a bound pod in a group, in the domain of its node, if it belongs there (not terminating: the
// scheduler does not count those), and not if it does not; a change marks the group changed.
func (x *Index) countLocked(b *boundPod, id string, g *spreadGroup) {
	pod := b.pod
	domain, in := "", false
	if pod.Namespace == g.namespace && pod.DeletionTimestamp == nil && g.selector.Matches(labels.Set(pod.Labels)) {
		if n := x.nodes[pod.Spec.NodeName]; n != nil && n.node != nil {
			domain, in = n.node.Labels[g.key]
		}
	}
	was, counted := b.spread[id]
	if counted == in && was == domain {
		return
	}
	if counted {
		g.counts[was]--
		delete(b.spread, id)
	}
	if in {
		g.counts[domain]++
		b.spread[id] = domain
	}
	x.changed[id] = true
}

// leastLocked is the fewest pods of a group in a domain the pod may go to: the values of the group's topology key
// on the nodes that carry every topology key of the pod's constraints and match its required node affinity. With
// fewer such domains than the constraint's minDomains, it is 0.
func (x *Index) leastLocked(pod *corev1.Pod, g *spreadGroup, c spreadConstraint, all []spreadConstraint) int {
	domains := x.domainsLocked(pod, g.key, all)
	if len(domains) < c.minDomains {
		return 0
	}
	least := -1
	for d := range domains {
		if n := g.counts[d]; least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0)
}

// domainSet counts the nodes that match a required node affinity and carry a set of topology keys, by their value
// of one of the keys; it is kept up to date from the first time it is asked for (setNode, deleteNode), so that a
// burst's spread pods do not each walk every node.
type domainSet struct {
	affinity nodeaffinity.RequiredNodeAffinity
	keys     []string
	key      string
	counts   map[string]int
	of       map[string]string
}

// domainsLocked returns the domains (value of key: nodes) of the nodes a pod with these constraints may count in.
func (x *Index) domainsLocked(pod *corev1.Pod, key string, all []spreadConstraint) map[string]int {
	keys := make([]string, 0, len(all))
	for _, c := range all {
		keys = append(keys, c.key)
	}
	sig, err := json.Marshal(struct {
		NodeSelector map[string]string
		Affinity     *corev1.NodeSelector
		Keys         []string
		Key          string
	}{pod.Spec.NodeSelector, requiredAffinity(pod), keys, key})
	if err != nil {
		sig = nil
	}
	if ds, ok := x.domainSets[string(sig)]; ok && sig != nil {
		return ds.counts
	}
	ds := &domainSet{affinity: nodeaffinity.GetRequiredNodeAffinity(pod), keys: keys, key: key, counts: map[string]int{}, of: map[string]string{}}
	for _, n := range x.ordered {
		ds.set(n.node)
	}
	if sig != nil {
		x.domainSets[string(sig)] = ds
	}
	return ds.counts
}

// set counts a node (nil: none) in the set, or not, as it matches now.
func (ds *domainSet) set(node *corev1.Node) {
	if node == nil {
		return
	}
	if was, ok := ds.of[node.Name]; ok {
		if ds.counts[was]--; ds.counts[was] <= 0 {
			delete(ds.counts, was)
		}
		delete(ds.of, node.Name)
	}
	for _, k := range ds.keys {
		if _, ok := node.Labels[k]; !ok {
			return
		}
	}
	if ok, err := ds.affinity.Match(node); err != nil || !ok {
		return
	}
	v := node.Labels[ds.key]
	ds.of[node.Name] = v
	ds.counts[v]++
}

// forget takes a deleted node out of the set.
func (ds *domainSet) forget(name string) {
	if was, ok := ds.of[name]; ok {
		if ds.counts[was]--; ds.counts[was] <= 0 {
			delete(ds.counts, was)
		}
		delete(ds.of, name)
	}
}

// requiredAffinity is the pod's required node affinity, nil when none.
func requiredAffinity(pod *corev1.Pod) *corev1.NodeSelector {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}
