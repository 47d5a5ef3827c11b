/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// ReasonNominated is the event on a successor nominated to the node its move planned for it.
const ReasonNominated = "Nominated"

// Activator puts pods held before the scheduling queue back in it (the scheduler framework's Handle).
type Activator interface {
	Activate(logger klog.Logger, pods map[string]*corev1.Pod)
}

// NominationOptions configure Nominations.
type NominationOptions struct {
	Kube  kubernetes.Interface
	Queue Activator
	// Recorder records the Nominated event on each successor; nil: none.
	Recorder events.EventRecorder
	// Interval is how often a held successor is put back in the queue until it passes (default 100ms); Timeout is
	// how long it is held at most (default 5s): then it is scheduled with or without its nomination.
	Interval, Timeout time.Duration
}

// Nominations steer a surge's successors to the nodes its command planned for the pods they replace. The surge
// expects, on the owner's ReplicaSet, one successor per node named; the scheduler plugin holds each new pod of that
// ReplicaSet before its first scheduling attempt (Hold, at PreEnqueue) while its status.nominatedNodeName is
// written. The scheduler tries a pod's nominated node before any other and counts the pod there while it waits,
// so that no sibling's successor takes its room; a nominated node that no longer fits leaves the pod to the
// scheduler's usual choice.
type Nominations struct {
	opts NominationOptions

	mu sync.Mutex
	// expected are the nodes not yet given to a successor, by ReplicaSet UID.
	expected map[types.UID][]string
	// successors are the nominations given, by pod UID.
	successors map[types.UID]*nomination
}

// nomination is one successor's: its node and how far writing it went.
type nomination struct {
	replicaSet types.UID
	node       string
	state      nominationState
	// passed says Hold let the pod into the scheduling queue.
	passed bool
}

type nominationState int

const (
	writing nominationState = iota
	written
	// released: the pod is scheduled without waiting for its nomination (writing it failed or took too long).
	released
)

// NewNominations returns empty Nominations.
func NewNominations(opts NominationOptions) *Nominations {
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &Nominations{opts: opts, expected: map[types.UID][]string{}, successors: map[types.UID]*nomination{}}
}

// Expect records that the ReplicaSet is about to create one successor for each node named ("" entries, pods
// whose move planned no node, are dropped); the successors take them in the order of the names.
func (n *Nominations) Expect(rs *appsv1.ReplicaSet, nodes []string) {
	var named []string
	for _, node := range nodes {
		if node != "" {
			named = append(named, node)
		}
	}
	if n == nil || rs == nil || len(named) == 0 {
		return
	}
	sort.Strings(named)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.expected[rs.UID] = named
}

// Forget ends what Expect recorded for the ReplicaSet (its surge ended): nodes not given are dropped, and so are
// the nominations of its successors.
func (n *Nominations) Forget(rs *appsv1.ReplicaSet) {
	if n == nil || rs == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.expected, rs.UID)
	for uid, nom := range n.successors {
		if nom.replicaSet == rs.UID {
			delete(n.successors, uid)
		}
	}
}

// Hold says why a pod waits before the scheduling queue ("" if it does not): a new pod of a ReplicaSet that
// surges, with nodes left to give, is given the first and waits until the scheduler's copy of it shows that
// nomination (or until writing it failed or took longer than the timeout).
func (n *Nominations) Hold(ctx context.Context, pod *corev1.Pod) string {
	if n == nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return ""
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != kindReplicaSet {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	nom := n.successors[pod.UID]
	if nom == nil {
		free := n.expected[ref.UID]
		if len(free) == 0 || pod.Status.NominatedNodeName != "" {
			return ""
		}
		nom = &nomination{replicaSet: ref.UID, node: free[0]}
		n.expected[ref.UID] = free[1:]
		n.successors[pod.UID] = nom
		go n.nominate(ctx, pod.DeepCopy(), nom)
	}
	switch {
	case nom.state == released, nom.state == written && pod.Status.NominatedNodeName == nom.node:
		nom.passed = true
		return ""
	default:
		return fmt.Sprintf("being nominated to node %s, where the move of the pod it replaces planned it", nom.node)
	}
}

// nominate writes the pod's nomination, then puts the pod back in the scheduling queue until Hold lets it pass; it
// releases the pod when the write fails or the timeout passes.
func (n *Nominations) nominate(ctx context.Context, pod *corev1.Pod, nom *nomination) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "node", nom.node)
	patch := []byte(fmt.Sprintf(`{"status":{"nominatedNodeName":%q}}`, nom.node))
	wctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	_, err := n.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(wctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	cancel()
	n.mu.Lock()
	if err != nil {
		nom.state = released
		logger.Error(err, "Nominating a successor failed; the scheduler places it without")
	} else {
		nom.state = written
		logger.V(2).Info("Nominated a successor to the node its move planned")
	}
	n.mu.Unlock()
	if err == nil && n.opts.Recorder != nil {
		n.opts.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonNominated, "Nominate",
			"nominated to node %s, planned for it by the move of the pod it replaces", nom.node)
	}
	// the queue re-runs Hold when the pod is activated; its copy of the pod shows the nomination once the
	// scheduler's informer delivers it. A pod released is given one more timeout to pass (it may be gone).
	deadline := time.Now().Add(n.opts.Timeout)
	_ = wait.PollUntilContextCancel(ctx, n.opts.Interval, true, func(context.Context) (bool, error) {
		n.mu.Lock()
		forgotten := n.successors[pod.UID] != nom
		passed := nom.passed
		now := time.Now()
		if !passed && !forgotten && nom.state != released && now.After(deadline) {
			nom.state = released
			logger.Info("A successor's nomination was not seen in time; the scheduler places it without")
		}
		n.mu.Unlock()
		if passed {
			return true, nil
		}
		n.opts.Queue.Activate(logger, map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
		// a pod whose surge ended passes Hold now: once activated, it is done with
		return forgotten || now.After(deadline.Add(n.opts.Timeout)), nil
	})
}
