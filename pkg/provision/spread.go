package provision

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stevedore-dev/stevedore/pkg/provision/simulation"
)

// spreadGroup tracks, for one hard topology spread constraint of the batch, how many matching pods each domain
// holds. The scheduler checks a spread constraint only when it schedules the pod that carries it; pods that merely
// match its selector are placed without regard to it. Since the order in which the scheduler will bind a batch's
// pods is not known, the solver keeps every constraint satisfied for any order: a pod that matches a group's
// selector may not make the group's skew exceed maxSkew, whether it carries the constraint or not.
type spreadGroup struct {
	namespace string
	selector  labels.Selector
	key       string
	maxSkew   int
	counts    map[string]int
	// histogram counts the domains holding each number of matching pods, so the minimum is found quickly.
	histogram map[int]int
}

func (g *spreadGroup) matches(pod *corev1.Pod) bool {
	return pod.Namespace == g.namespace && g.selector.Matches(labels.Set(pod.Labels))
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

// allows reports whether one more matching pod in domain d keeps the skew within maxSkew.
func (g *spreadGroup) allows(d string) bool {
	return g.counts[d]+1-g.min() <= g.maxSkew
}

// spreadGroups collects the batch's hard spread constraints and counts the matching pods already in the snapshot.
func spreadGroups(pods []*corev1.Pod, snap *simulation.Snapshot) []*spreadGroup {
	byKey := map[string]*spreadGroup{}
	var out []*spreadGroup
	for _, p := range pods {
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				continue
			}
			key := fmt.Sprintf("%s|%s|%s|%d", p.Namespace, sel.String(), c.TopologyKey, c.MaxSkew)
			g, ok := byKey[key]
			if !ok {
				g = &spreadGroup{namespace: p.Namespace, selector: sel, key: c.TopologyKey, maxSkew: int(c.MaxSkew),
					counts: map[string]int{}, histogram: map[int]int{}}
				byKey[key] = g
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
			d, ok := node.Labels[g.key]
			if !ok {
				continue
			}
			g.addDomain(d)
			for _, pi := range ni.GetPods() {
				if g.matches(pi.GetPod()) {
					g.increment(d)
				}
			}
		}
	}
	return out
}

// groupsAllow reports whether placing pod on a node labelled nodeLabels keeps every matching group within its skew.
func groupsAllow(groups []*spreadGroup, pod *corev1.Pod, nodeLabels map[string]string) bool {
	for _, g := range groups {
		if !g.matches(pod) {
			continue
		}
		if d, ok := nodeLabels[g.key]; ok && !g.allows(d) {
			return false
		}
	}
	return true
}

// groupsCount records pod in the groups it matches.
func groupsCount(groups []*spreadGroup, pod *corev1.Pod, nodeLabels map[string]string) {
	for _, g := range groups {
		if !g.matches(pod) {
			continue
		}
		if d, ok := nodeLabels[g.key]; ok {
			g.increment(d)
		}
	}
}

// groupsUncount removes pod from the groups it matches.
func groupsUncount(groups []*spreadGroup, pod *corev1.Pod, nodeLabels map[string]string) {
	for _, g := range groups {
		if !g.matches(pod) {
			continue
		}
		if d, ok := nodeLabels[g.key]; ok {
			g.decrement(d)
		}
	}
}

// groupsAddNode registers a new node's domains (its hostname, and any new value of a group's key).
func groupsAddNode(groups []*spreadGroup, nodeLabels map[string]string) {
	for _, g := range groups {
		if d, ok := nodeLabels[g.key]; ok {
			g.addDomain(d)
		}
	}
}

// groupsRemoveNode forgets a node's hostname domain (a virtual node the solver gave up on).
func groupsRemoveNode(groups []*spreadGroup, nodeLabels map[string]string) {
	for _, g := range groups {
		if g.key != corev1.LabelHostname {
			continue
		}
		if d, ok := nodeLabels[g.key]; ok && g.counts[d] == 0 {
			g.removeDomain(d)
		}
	}
}
