/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package simulation runs the scheduler's own PreFilter and Filter plugins against a cluster that does not exist
// yet: real nodes and their pods, nodes being launched, and virtual nodes the solver is considering, each a
// NodeInfo carrying the labels, taints and allocatable the real node will have. Whatever passes here passes in
// kube-scheduler.
package simulation

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Snapshot is a mutable set of NodeInfos the framework's plugins read through the scheduler's SharedLister
// interface. Unlike the scheduler's own snapshot it is changed in place, a pod or node at a time, so a solver can
// place pods one by one and every later check sees the earlier placements. It is not safe for concurrent use.
type Snapshot struct {
	*cache.Snapshot // empty: pod-group listers for the Workload API, which Stevedore does not simulate

	nodes map[string]*framework.NodeInfo
	list  []fwk.NodeInfo
	index map[string]int

	listsDirty   bool
	withAffinity []fwk.NodeInfo
	withAnti     []fwk.NodeInfo
	withWideAnti []fwk.NodeInfo
	pvcRefs      map[string]int

	// observer hears every change while not suspended (the simulator's incremental PreFilter state); suspended
	// counts nested Suspend calls, gen counts the changes it heard.
	observer  observer
	suspended int
	gen       uint64
	// tried logs the changes made while suspended, in order (until the last Resume); triedAll is false once one
	// of them is of a kind the log does not keep (a node added or removed).
	tried    []triedChange
	triedAll bool
	// undo logs, while suspended, how to undo each change, and marks where each nested Suspend began (Rollback).
	undo        []undoChange
	marks       []int
	rollingBack bool

	// podInfos, when set, makes each pod object's PodInfo once across snapshots (UsePodInfos).
	podInfos *PodInfos
}

// UsePodInfos has the snapshot take the pods' PodInfos from infos, shared with other snapshots, instead of making
// its own. Call it before adding pods.
func (s *Snapshot) UsePodInfos(infos *PodInfos) { s.podInfos = infos }

// undoChange undoes one change made while suspended: a node relabelled (back to old), a pod added (sign 1) or
// removed (-1) on a node, or a node added or removed (nodeOp, which Rollback cannot undo).
type undoChange struct {
	old    *v1.Node
	node   string
	pod    *v1.Pod
	sign   int
	nodeOp bool
}

// triedChange is a change made while suspended, as it was when made: a node relabelled (old to node, with the pods
// it had) or a pod added (sign 1) or removed (-1) on a node.
type triedChange struct {
	old, node *v1.Node
	pods      []fwk.PodInfo
	pod       fwk.PodInfo
	sign      int
}

// observer is told of each change to a snapshot: pods added and removed, nodes added (empty: their pods follow
// one by one), about to be removed (with their pods), and relabelled (old is the node object before).
type observer interface {
	nodeAdded(ni fwk.NodeInfo)
	nodeRemoving(ni fwk.NodeInfo)
	nodeChanged(ni fwk.NodeInfo, old *v1.Node)
	// reset forgets everything derived from the snapshot (before many changes at once).
	reset()
	podAdded(ni fwk.NodeInfo, pi fwk.PodInfo)
	podRemoved(ni fwk.NodeInfo, pi fwk.PodInfo)
}

// notify tells the observer of a change, unless suspended.
func (s *Snapshot) notify(tell func(observer)) {
	if s.suspended > 0 {
		return
	}
	s.gen++
	if s.observer != nil {
		tell(s.observer)
	}
}

// Suspend stops telling the observer about changes until the matching Resume. Between the two the caller changes
// the snapshot only to try something and must leave it exactly as it found it: a trial that is kept is applied
// again after Resume. While suspended, PreFilter computes its state from the incremental state and the changes
// tried since (Tried), or from scratch.
func (s *Snapshot) Suspend() {
	if s.suspended == 0 {
		s.tried, s.triedAll = s.tried[:0], true
	}
	s.suspended++
	s.marks = append(s.marks, len(s.undo))
}

// Resume ends a Suspend.
func (s *Snapshot) Resume() {
	if s.suspended == 0 {
		panic("simulation: Resume without Suspend")
	}
	s.suspended--
	s.marks = s.marks[:len(s.marks)-1]
	if s.suspended == 0 {
		clear(s.tried)
		s.tried = s.tried[:0]
		clear(s.undo)
		s.undo = s.undo[:0]
	}
}

// Rollback undoes, newest first, the changes made since the matching Suspend, and ends it: a trial's undo log is
// kept by the snapshot, so a trial need not reverse its changes by hand. (A pod whose removal is undone is put back
// last among its node's pods.) It panics when not suspended, or when a
// node was added or removed since the Suspend (a trial that does so removes or adds it again itself).
func (s *Snapshot) Rollback() {
	if s.suspended == 0 {
		panic("simulation: Rollback without Suspend")
	}
	mark := s.marks[len(s.marks)-1]
	log := s.undo[mark:]
	s.undo = s.undo[:mark]
	s.rollingBack = true
	for i := len(log) - 1; i >= 0; i-- {
		c := log[i]
		var err error
		switch {
		case c.nodeOp:
			panic("simulation: Rollback of a trial that added or removed a node")
		case c.pod == nil:
			err = s.SetNode(c.old)
		case c.sign > 0:
			err = s.RemovePod(c.node, c.pod)
		default:
			err = s.AddPod(c.node, c.pod)
		}
		if err != nil {
			panic(fmt.Sprintf("simulation: undoing a tried change: %v", err))
		}
	}
	s.rollingBack = false
	clear(log)
	s.Resume()
}

// logUndo records, while suspended, how to undo a change (Rollback).
func (s *Snapshot) logUndo(c undoChange) {
	if len(s.marks) > 0 && !s.rollingBack {
		s.undo = append(s.undo, c)
	}
}

// try logs a change made while suspended.
func (s *Snapshot) try(c triedChange) {
	if s.suspended > 0 && s.triedAll {
		s.tried = append(s.tried, c)
	}
}

// untried marks the changes since Suspend as not all logged: a node was added or removed.
func (s *Snapshot) untried() {
	if s.suspended > 0 {
		s.triedAll = false
	}
	s.logUndo(undoChange{nodeOp: true})
}

// Suspended reports whether changes are being tried.
func (s *Snapshot) Suspended() bool { return s.suspended > 0 }

// NewSnapshot returns an empty snapshot.
func NewSnapshot() *Snapshot {
	return &Snapshot{Snapshot: cache.NewEmptySnapshot(), nodes: map[string]*framework.NodeInfo{}, index: map[string]int{},
		pvcRefs: map[string]int{}}
}

// AddNode adds a node with pods already on it. Adding a node that exists replaces it.
func (s *Snapshot) AddNode(node *v1.Node, pods ...*v1.Pod) *framework.NodeInfo {
	if _, ok := s.nodes[node.Name]; ok {
		s.RemoveNode(node.Name)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	s.nodes[node.Name] = ni
	s.index[node.Name] = len(s.list)
	s.list = append(s.list, ni)
	s.untried()
	s.notify(func(o observer) { o.nodeAdded(ni) })
	for _, p := range pods {
		s.addPod(ni, p)
	}
	s.listsDirty = true
	return ni
}

// RemoveNode removes a node and its pods.
func (s *Snapshot) RemoveNode(name string) {
	ni, ok := s.nodes[name]
	if !ok {
		return
	}
	s.untried()
	s.notify(func(o observer) { o.nodeRemoving(ni) })
	for _, pi := range ni.GetPods() {
		s.countPVCs(pi.GetPod(), -1)
	}
	delete(s.nodes, name)
	i := s.index[name]
	last := len(s.list) - 1
	s.list[i] = s.list[last]
	s.index[s.list[i].Node().Name] = i
	s.list = s.list[:last]
	delete(s.index, name)
	s.listsDirty = true
}

// RemoveNodes removes many nodes at once. The observer forgets what it derived from the snapshot instead of
// following each removal.
func (s *Snapshot) RemoveNodes(names ...string) {
	if len(names) == 0 {
		return
	}
	s.notify(func(o observer) { o.reset() })
	s.suspended++
	for _, name := range names {
		s.RemoveNode(name)
	}
	s.suspended--
}

// AddPod places a pod on a node.
func (s *Snapshot) AddPod(nodeName string, pod *v1.Pod) error {
	ni, ok := s.nodes[nodeName]
	if !ok {
		return fmt.Errorf("node %s is not in the snapshot", nodeName)
	}
	s.addPod(ni, pod)
	return nil
}

func (s *Snapshot) addPod(ni *framework.NodeInfo, pod *v1.Pod) {
	var pi *framework.PodInfo
	if s.podInfos != nil {
		pi = s.podInfos.Get(pod)
	} else {
		pi = newPodInfo(pod)
	}
	hadAffinity := len(ni.PodsWithAffinity) > 0
	ni.AddPodInfo(pi)
	if hadAffinity != (len(ni.PodsWithAffinity) > 0) || len(pi.RequiredAntiAffinityTerms) > 0 {
		s.listsDirty = true
	}
	s.countPVCs(pod, 1)
	s.try(triedChange{node: ni.Node(), pod: pi, sign: 1})
	s.logUndo(undoChange{node: ni.Node().Name, pod: pod, sign: 1})
	s.notify(func(o observer) { o.podAdded(ni, pi) })
}

// SetNode replaces the node object of a node in the snapshot (its labels, taints or allocatable), keeping its pods.
func (s *Snapshot) SetNode(node *v1.Node) error {
	ni, ok := s.nodes[node.Name]
	if !ok {
		return fmt.Errorf("node %s is not in the snapshot", node.Name)
	}
	old := ni.Node()
	ni.SetNode(node)
	if s.suspended > 0 && s.triedAll {
		s.try(triedChange{old: old, node: node, pods: slices.Clone(ni.GetPods())})
	}
	s.logUndo(undoChange{old: old, node: node.Name})
	s.notify(func(o observer) { o.nodeChanged(ni, old) })
	return nil
}

// RemovePod takes a pod off a node.
func (s *Snapshot) RemovePod(nodeName string, pod *v1.Pod) error {
	ni, ok := s.nodes[nodeName]
	if !ok {
		return fmt.Errorf("node %s is not in the snapshot", nodeName)
	}
	var removed fwk.PodInfo
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == pod.UID {
			removed = pi
			break
		}
	}
	hadAffinity := len(ni.PodsWithAffinity) > 0
	if err := ni.RemovePod(klog.Background(), pod); err != nil {
		return err
	}
	if removed != nil {
		s.try(triedChange{node: ni.Node(), pod: removed, sign: -1})
		s.logUndo(undoChange{node: nodeName, pod: removed.GetPod(), sign: -1})
		s.notify(func(o observer) { o.podRemoved(ni, removed) })
	}
	s.countPVCs(pod, -1)
	// the lists of nodes with affinity or anti-affinity pods change only when such a pod goes
	if removed == nil || hadAffinity != (len(ni.PodsWithAffinity) > 0) || len(removed.GetRequiredAntiAffinityTerms()) > 0 {
		s.listsDirty = true
	}
	return nil
}

func (s *Snapshot) countPVCs(pod *v1.Pod, delta int) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			key := pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
			s.pvcRefs[key] += delta
			if s.pvcRefs[key] <= 0 {
				delete(s.pvcRefs, key)
			}
		}
	}
}

// NodeInfo returns the concrete NodeInfo of a node, or nil.
func (s *Snapshot) NodeInfo(name string) *framework.NodeInfo { return s.nodes[name] }

// Len is the number of nodes.
func (s *Snapshot) Len() int { return len(s.list) }

// NodeInfos implements fwk.SharedLister.
func (s *Snapshot) NodeInfos() fwk.NodeInfoLister { return s }

// StorageInfos implements fwk.SharedLister.
func (s *Snapshot) StorageInfos() fwk.StorageInfoLister { return s }

// List implements fwk.NodeInfoLister.
func (s *Snapshot) List() ([]fwk.NodeInfo, error) { return s.list, nil }

func (s *Snapshot) refreshLists() {
	if !s.listsDirty {
		return
	}
	s.withAffinity, s.withAnti, s.withWideAnti = s.withAffinity[:0], s.withAnti[:0], s.withWideAnti[:0]
	for _, ni := range s.list {
		if len(ni.GetPodsWithAffinity()) > 0 {
			s.withAffinity = append(s.withAffinity, ni)
		}
		if len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
			s.withAnti = append(s.withAnti, ni)
		}
		if len(ni.GetPodsWithRequiredNonHostScopedAntiAffinity()) > 0 {
			s.withWideAnti = append(s.withWideAnti, ni)
		}
	}
	s.listsDirty = false
}

// HavePodsWithAffinityList implements fwk.NodeInfoLister.
func (s *Snapshot) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	s.refreshLists()
	return s.withAffinity, nil
}

// HavePodsWithRequiredAntiAffinityList implements fwk.NodeInfoLister.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	s.refreshLists()
	return s.withAnti, nil
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList implements fwk.NodeInfoLister.
func (s *Snapshot) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	s.refreshLists()
	return s.withWideAnti, nil
}

// Get implements fwk.NodeInfoLister.
func (s *Snapshot) Get(name string) (fwk.NodeInfo, error) {
	if ni, ok := s.nodes[name]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

// IsPVCUsedByPods implements fwk.StorageInfoLister.
func (s *Snapshot) IsPVCUsedByPods(key string) bool { return s.pvcRefs[key] > 0 }
