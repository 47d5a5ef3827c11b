/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package freeroom keeps the free room of every node of the cluster from the informers (its allocatable less the
// requests of the pods bound to it and of the pods sent to it that are not bound yet), so that provisioning can tell,
// as a pod enters the scheduling queue and without a scheduling cycle, whether some node may take it: a pod no node
// has room for is planned at once, instead of first failing a cycle. It also counts the pods of topology spread
// groups by domain (spread.go), so that a pod planned on a node is released when binding it there keeps its spread.
//
// The answers are screens, not placements: room, cordoning, taints with a NoSchedule or NoExecute effect and the
// pod's required node affinity; the skew of hard spread constraints. A node the screen names may still refuse the
// pod (the scheduler's Filter plugins decide).
package freeroom

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// sentTTL is how long a pod sent to a node keeps its room there without being bound: long enough for a busy
// scheduler to try it, short enough that a pod the scheduler put aside without a word does not hold room for long.
const sentTTL = time.Minute

// Index is the free room of the cluster's nodes. It is safe for concurrent use.
type Index struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// nodes by name, and those the cache shows in the order of their names (the first node with room is the first
	// by name)
	nodes   map[string]*nodeRoom
	ordered []*nodeRoom
	// bound are the pods counted on a node, sent those sent to one and not bound yet
	bound map[types.UID]*boundPod
	sent  map[types.UID]sentPod
	// groups are the spread groups counted, by id; changed the ids of those whose counts changed since the last
	// notice, onSpread who is told
	groups   map[string]*spreadGroup
	changed  map[string]bool
	onSpread func(ids []string)
	// foreign names the nodes Stevedore did not launch (no NodePool label)
	foreign map[string]bool
	// domainSets count the nodes pods of spread groups may count in, by domain (spread.go); sentSpread are the pods
	// released by SpreadAllows and not bound yet
	domainSets map[string]*domainSet
	sentSpread map[types.UID]sentSpread
}

type nodeRoom struct {
	name  string
	node  *corev1.Node
	alloc resources.Requests
	// used sums the requests of the pods bound to the node, sent those of the pods sent to it; free is alloc less
	// both, kept as they change (Send looks at every node's for each pod)
	used, sent, free resources.Requests
	// hard are the node's taints with a NoSchedule or NoExecute effect
	hard []corev1.Taint
	// comingUp says the node is one Stevedore launched that has not finished initializing: its room is planned for
	// the pods it comes up for, and Send passes it by (in a burst, most nodes)
	comingUp bool
	// daemons counts the node's pods of each DaemonSet, by the DaemonSet's UID, and hasDaemon says whether there is
	// one (made once: Send hands it to Kept for every node it looks at); pods are the node's pods
	daemons   map[types.UID]int
	hasDaemon func(owner types.UID) bool
	pods      map[types.UID]struct{}
	// matches memoizes, by a pod's node selection (affinityKey), whether the node matches it: the pods of a burst
	// share a few, and matching one allocates. Emptied when the node changes.
	matches map[string]bool
}

type boundPod struct {
	pod    *corev1.Pod
	req    resources.Requests
	daemon types.UID
	// spread are the groups the pod is counted in, with the domain it is counted in
	spread map[string]string
	// assumed is set while the pod counts where the scheduler reserved a node for it, before the cache shows it
	// bound
	assumed bool
}

type sentPod struct {
	node string
	req  resources.Requests
	at   time.Time
}

// New returns an empty index; Register has it follow the informers.
func New(clk clock.PassiveClock) *Index {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Index{clock: clk, nodes: map[string]*nodeRoom{}, bound: map[types.UID]*boundPod{}, sent: map[types.UID]sentPod{},
		groups: map[string]*spreadGroup{}, changed: map[string]bool{}, domainSets: map[string]*domainSet{},
		sentSpread: map[types.UID]sentSpread{}, foreign: map[string]bool{}}
}

// OnSpreadChange has fn told, outside the index's lock, the ids of the spread groups (SpreadAllows) whose counts
// changed: the pods held for those groups may be released.
func (x *Index) OnSpreadChange(fn func(ids []string)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.onSpread = fn
}

// Register has the index follow the nodes and pods informers.
func (x *Index) Register(nodes, pods cache.SharedIndexInformer) error {
	onNode, onPod := x.Handlers()
	if _, err := nodes.AddEventHandler(onNode); err != nil {
		return err
	}
	_, err := pods.AddEventHandler(onPod)
	return err
}

// Handlers are what the index does on the nodes' and pods' events.
func (x *Index) Handlers() (nodes, pods cache.ResourceEventHandlerFuncs) {
	return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { x.setNode(obj) },
			UpdateFunc: func(_, obj any) { x.setNode(obj) },
			DeleteFunc: func(obj any) { x.deleteNode(obj) },
		}, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { x.setPod(obj) },
			UpdateFunc: func(_, obj any) { x.setPod(obj) },
			DeleteFunc: func(obj any) { x.deletePod(obj) },
		}
}

// nodeLocked returns a node's entry, made if missing.
func (x *Index) nodeLocked(name string) *nodeRoom {
	n := x.nodes[name]
	if n == nil {
		n = &nodeRoom{name: name, daemons: map[types.UID]int{}, pods: map[types.UID]struct{}{}}
		n.hasDaemon = func(owner types.UID) bool { return n.daemons[owner] > 0 }
		x.nodes[name] = n
	}
	return n
}

// orderedIndex is where a node's entry is, or goes, in ordered.
func (x *Index) orderedIndex(name string) (int, bool) {
	return slices.BinarySearchFunc(x.ordered, name, func(n *nodeRoom, name string) int { return strings.Compare(n.name, name) })
}

// refresh works out the node's free room again, after its allocatable or the pods counted on it changed.
func (n *nodeRoom) refresh() { n.free = n.alloc.Sub(n.used).Sub(n.sent) }

func (x *Index) setNode(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	x.mu.Lock()
	n := x.nodeLocked(node.Name)
	old := n.node
	_, ours := node.Labels[stevedorev1.LabelNodePool]
	if ours {
		delete(x.foreign, node.Name)
	} else {
		x.foreign[node.Name] = true
	}
	n.comingUp = ours && node.Labels[stevedorev1.LabelInitialized] != "true"
	if old == nil || !maps.Equal(old.Labels, node.Labels) || old.Name != node.Name {
		clear(n.matches)
	}
	n.node, n.alloc = node, resources.List(node.Status.Allocatable)
	n.refresh()
	n.hard = n.hard[:0]
	for _, t := range node.Spec.Taints {
		if doNotSchedule(&t) {
			n.hard = append(n.hard, t)
		}
	}
	for _, ds := range x.domainSets {
		ds.set(node)
	}
	if old == nil { // new, or held until now only for the pods bound to it: count them in their groups
		i, _ := x.orderedIndex(node.Name)
		x.ordered = slices.Insert(x.ordered, i, n)
		for uid := range n.pods {
			x.recountLocked(x.bound[uid])
		}
	}
	x.mu.Unlock()
	x.notify()
}

func (x *Index) deleteNode(obj any) {
	node, ok := reconcile.Deleted[*corev1.Node](obj)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.foreign, node.Name)
	if n := x.nodes[node.Name]; n != nil && n.node != nil {
		for _, ds := range x.domainSets {
			ds.forget(node.Name)
		}
		n.node, n.hard = nil, nil
		if i, found := x.orderedIndex(node.Name); found {
			x.ordered = slices.Delete(x.ordered, i, i+1)
		}
		if len(n.pods) == 0 {
			delete(x.nodes, node.Name)
		}
	}
}

// setPod counts a pod on the node it is bound to, and no longer as sent; a pod that finished counts nowhere.
func (x *Index) setPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	done := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if pod.Spec.NodeName == "" && !done {
		return
	}
	x.mu.Lock()
	x.unsendLocked(pod.UID)
	b := x.bound[pod.UID]
	switch {
	case b != nil && !done && b.pod.Spec.NodeName == pod.Spec.NodeName:
		b.pod, b.assumed = pod, false
		x.recountLocked(b) // its labels or its deletion may move it out of a group
	case done:
		if b != nil {
			x.unbindLocked(b)
		}
	default:
		if b != nil {
			x.unbindLocked(b)
		}
		x.bindLocked(pod)
	}
	x.mu.Unlock()
	x.notify()
}

func (x *Index) deletePod(obj any) {
	pod, ok := reconcile.Deleted[*corev1.Pod](obj)
	if !ok {
		return
	}
	x.mu.Lock()
	x.unsendLocked(pod.UID)
	if b := x.bound[pod.UID]; b != nil {
		x.unbindLocked(b)
	}
	x.mu.Unlock()
	x.notify()
}

func (x *Index) bindLocked(pod *corev1.Pod) {
	b := &boundPod{pod: pod, req: resources.Pod(pod), spread: map[string]string{}}
	if owner := podutil.DaemonSetOwner(pod); owner != nil {
		b.daemon = owner.UID
	}
	x.bound[pod.UID] = b
	n := x.nodeLocked(pod.Spec.NodeName)
	n.pods[pod.UID] = struct{}{}
	n.used = n.used.Add(b.req)
	n.refresh()
	if b.daemon != "" {
		n.daemons[b.daemon]++
	}
	x.recountLocked(b)
}

func (x *Index) unbindLocked(b *boundPod) {
	uid := b.pod.UID
	delete(x.bound, uid)
	for id, domain := range b.spread {
		x.groups[id].counts[domain]--
		x.changed[id] = true
	}
	n := x.nodes[b.pod.Spec.NodeName]
	if n == nil {
		return
	}
	delete(n.pods, uid)
	n.used = n.used.Sub(b.req)
	n.refresh()
	if b.daemon != "" {
		if n.daemons[b.daemon]--; n.daemons[b.daemon] <= 0 {
			delete(n.daemons, b.daemon)
		}
	}
	if n.node == nil && len(n.pods) == 0 {
		delete(x.nodes, b.pod.Spec.NodeName) // held only for the pods of a node the cache no longer shows
	}
}

// unsendLocked takes a pod out of the room and the spread counts it was sent to (Send, SpreadAllows).
func (x *Index) unsendLocked(uid types.UID) {
	x.unsendSpreadLocked(uid)
	x.unsendRoomLocked(uid)
}

func (x *Index) unsendRoomLocked(uid types.UID) {
	s, ok := x.sent[uid]
	if !ok {
		return
	}
	delete(x.sent, uid)
	if n := x.nodes[s.node]; n != nil {
		n.sent = n.sent.Sub(s.req)
		n.refresh()
	}
}

// notify tells onSpread the groups whose counts changed.
func (x *Index) notify() {
	x.mu.Lock()
	if len(x.changed) == 0 || x.onSpread == nil {
		clear(x.changed)
		x.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(x.changed))
	for id := range x.changed {
		ids = append(ids, id)
	}
	clear(x.changed)
	fn := x.onSpread
	x.mu.Unlock()
	slices.Sort(ids)
	fn(ids)
}

// Foreign returns the names of the nodes Stevedore did not launch (no NodePool label), those a pod planned on a
// node of Stevedore's may take besides its own.
func (x *Index) Foreign() sets.Set[string] {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(sets.Set[string], len(x.foreign)+1)
	for name := range x.foreign {
		out.Insert(name)
	}
	return out
}

// Kept says what a node keeps for pods planned there that are not bound yet (and false when the node takes no pod
// that is not planned there: a node coming up for others). hasDaemon reports whether a DaemonSet has a pod on the
// node.
type Kept func(node *corev1.Node, hasDaemon func(owner types.UID) bool) (resources.Requests, bool)

// Send finds the first node, by name, that may take the pod (requests req): not a node Stevedore launched that is
// still coming up (its room is planned for others), one with room for it, less the room kept there and the room of
// the pods sent there before, not cordoned, with no taint the pod does not tolerate and matching its required node
// affinity. The pod's room is then counted there until it is bound, deleted, given
// back (Unsend) or sentTTL passes. It returns the node's name, "" when no node may take the pod.
func (x *Index) Send(logger klog.Logger, pod *corev1.Pod, req resources.Requests, kept Kept) string {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	key := affinityKey(pod)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unsendRoomLocked(pod.UID)
	x.expireLocked()
	for _, n := range x.ordered {
		if n.comingUp || !req.Fits(n.free) || n.node.Spec.Unschedulable || untolerated(logger, n.hard, pod.Spec.Tolerations) {
			continue
		}
		// the room kept for planned pods first: in a burst it turns away most nodes, those launching for others
		if !n.matchesLocked(key, affinity) {
			continue
		}
		room, takes := kept(n.node, n.hasDaemon)
		if !takes || !req.Add(room).Fits(n.free) {
			continue
		}
		x.sent[pod.UID] = sentPod{node: n.name, req: req, at: x.clock.Now()}
		n.sent = n.sent.Add(req)
		n.refresh()
		return n.name
	}
	return ""
}

// untolerated reports whether one of taints is not tolerated.
func untolerated(logger klog.Logger, taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	for i := range taints {
		if !corev1helpers.TolerationsTolerateTaint(logger, tolerations, &taints[i], true) {
			return true
		}
	}
	return false
}

// Reserve counts a pod on the node the scheduler reserved for it, before the cache shows it bound there (the
// scheduler counts it there from then on).
func (x *Index) Reserve(pod *corev1.Pod, node string) {
	x.mu.Lock()
	x.unsendLocked(pod.UID)
	if b := x.bound[pod.UID]; b == nil {
		assumed := pod.DeepCopy()
		assumed.Spec.NodeName = node
		x.bindLocked(assumed)
		x.bound[pod.UID].assumed = true
	}
	x.mu.Unlock()
	x.notify()
}

// Unreserve undoes Reserve for a pod whose binding failed (one the cache shows bound stays).
func (x *Index) Unreserve(uid types.UID) {
	x.mu.Lock()
	if b := x.bound[uid]; b != nil && b.assumed {
		x.unbindLocked(b)
	}
	x.mu.Unlock()
	x.notify()
}

// Unsend gives back the room a pod sent to a node held there (its scheduling attempt ended without a binding).
func (x *Index) Unsend(uid types.UID) {
	x.mu.Lock()
	x.unsendLocked(uid)
	x.mu.Unlock()
	x.notify()
}

// expireLocked drops the pods sent longer than sentTTL ago.
func (x *Index) expireLocked() {
	now := x.clock.Now()
	for uid, s := range x.sent {
		if now.Sub(s.at) > sentTTL {
			x.unsendRoomLocked(uid)
		}
	}
	for uid, s := range x.sentSpread {
		if now.Sub(s.at) > sentTTL {
			x.unsendSpreadLocked(uid)
		}
	}
}

func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// maxMatches bounds the node selections a node keeps matches for (pods pinned to a node each have their own).
const maxMatches = 64

// affinityKey identifies what a pod requires of a node's labels and name: its node selector and its required node
// affinity ("" when it requires nothing).
func affinityKey(pod *corev1.Pod) string {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(pod.Spec.NodeSelector) == 0 && required == nil {
		return ""
	}
	raw, err := json.Marshal(struct {
		Selector map[string]string    `json:"s,omitempty"`
		Required *corev1.NodeSelector `json:"r,omitempty"`
	}{pod.Spec.NodeSelector, required})
	if err != nil {
		// not reached (these types always marshal): a key no other pod has
		return "pod/" + string(pod.UID)
	}
	return string(raw)
}

// matchesLocked reports whether the node matches the pod's node selection (key, affinity), memoized by key.
func (n *nodeRoom) matchesLocked(key string, affinity nodeaffinity.RequiredNodeAffinity) bool {
	if key == "" {
		return true
	}
	if ok, seen := n.matches[key]; seen {
		return ok
	}
	ok, err := affinity.Match(n.node)
	ok = ok && err == nil
	if n.matches == nil || len(n.matches) >= maxMatches {
		n.matches = map[string]bool{}
	}
	n.matches[key] = ok
	return ok
}
