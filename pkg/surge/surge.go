/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package surge moves pods make-before-break. A pod whose owner can scale (a Deployment, or a ReplicaSet of its
// own) is moved by scaling the owner up by one: the successor is scheduled and becomes Ready while the old pod
// still serves; then the old pod is ranked first for deletion (pod-deletion-cost) and the owner scaled back, so
// that the ReplicaSet controller deletes the old pod. No eviction is made and the owner never has fewer Ready
// replicas than before; its replica count and template end as they were.
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
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Options configure a Surger.
type Options struct {
	Kube        kubernetes.Interface
	Pods        corelisters.PodLister
	ReplicaSets appslisters.ReplicaSetLister
	Deployments appslisters.DeploymentLister
	// HPAs are read for their maxReplicas; nil: none is.
	HPAs autoscalinglisters.HorizontalPodAutoscalerLister
	// Interval is how often a surge looks at its successors (default 1s).
	Interval time.Duration
	// GitOpsManagers are the field managers that undo a change to a field they own (GitOps controllers with
	// self-heal): a pod whose owner's spec.replicas one of them owns is evicted, not surged.
	GitOpsManagers []string
	// Nominations steer the successors to the nodes planned for the pods they replace; nil: the scheduler places
	// them as it would any pod.
	Nominations *Nominations
}

// Surger moves pods by surging their owners.
type Surger struct {
	opts Options

	mu sync.Mutex
	// moving are the owners a Move of this process surges, or Recover scales back (Owner.String()).
	moving map[string]bool
	// ready counts each ReplicaSet's Ready pods at a version of the ReplicaSet (readyPods)
	ready map[types.UID]readyCount
}

// readyCount is a ReplicaSet's Ready pods as counted when the ReplicaSet was at a resource version.
type readyCount struct {
	version string
	ready   int32
}

// New returns a Surger.
func New(opts Options) *Surger {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	return &Surger{opts: opts, moving: map[string]bool{}, ready: map[types.UID]readyCount{}}
}

// hold records that a Move surges the owner; it is false when one does already.
func (s *Surger) hold(o Owner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.moving[o.String()] {
		return false
	}
	s.moving[o.String()] = true
	return true
}

func (s *Surger) release(o Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.moving, o.String())
}

// The kinds of owner a surge scales.
const (
	kindDeployment = "Deployment"
	kindReplicaSet = "ReplicaSet"
)

// Owner is the workload whose scale a surge changes.
type Owner struct {
	// Kind is Deployment or ReplicaSet.
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	// GitOps names the GitOps controller that owns the owner's spec.replicas, when that is why its pods do not
	// surge.
	GitOps string
	// ReplicaSet is the ReplicaSet that owns the pods (the Deployment's only active one).
	ReplicaSet *appsv1.ReplicaSet
}

func (o Owner) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Result is what Move did, pod by pod ("namespace/name").
type Result struct {
	// Moved are the pods whose successors are Ready and that their ReplicaSets are deleting.
	Moved []string
	// Failed says why each other pod did not move; it is still there.
	Failed map[string]string
}

// surging is one owner's surge: its pods that move and the scale before and during it.
type surging struct {
	owner    Owner
	pods     []*corev1.Pod
	from, to int32
	// oldCosts are the pods' deletion-cost annotations before the surge ("" when absent), to restore on failure.
	oldCosts map[string][2]*string
	// nodes are those planned for the successors (nominated to them).
	nodes   []string
	ready   bool
	failure string
}

// Move moves pods by surging their owners, each owner by as many replicas as it has pods among them: it waits up
// to timeout for the successors to be Ready, then scales each owner back with the old pods ranked first for
// deletion. targets names, by pod UID, the node planned for each pod's successor (the successors are nominated
// there). Pods that cannot surge, and the pods of an owner whose successors are not Ready in time, are listed in
// Failed (their owner is scaled back, which deletes the successors that are not Ready).
func (s *Surger) Move(ctx context.Context, pods []*corev1.Pod, modes func(*corev1.Pod) stevedorev1.Replacement, targets map[types.UID]string,
	timeout time.Duration) Result {
	res := Result{Failed: map[string]string{}}
	surges := s.group(pods, modes, res.Failed)
	var active []*surging
	for _, sg := range surges {
		if !s.hold(sg.owner) {
			sg.failure = "it is surging already"
			continue
		}
		if err := s.start(ctx, sg, targets); err != nil {
			sg.failure = err.Error()
			s.restoreCosts(ctx, sg)
			s.release(sg.owner)
			continue
		}
		klog.FromContext(ctx).Info("Surging", "owner", sg.owner.String(), "replicas", sg.to, "from", sg.from, "moving", podNames(sg.pods),
			"nodes", sg.nodes)
		active = append(active, sg)
	}
	if len(active) > 0 {
		_ = wait.PollUntilContextTimeout(ctx, s.opts.Interval, timeout, true, func(context.Context) (bool, error) {
			done := true
			for _, sg := range active {
				if !sg.ready && sg.failure == "" {
					sg.ready, sg.failure = s.successorsReady(sg)
				}
				done = done && (sg.ready || sg.failure != "")
			}
			return done, nil
		})
	}
	for _, sg := range active {
		s.end(ctx, sg, timeout)
		s.release(sg.owner)
	}
	for _, sg := range surges {
		for _, pod := range sg.pods {
			if sg.failure != "" {
				res.Failed[podutil.Key(pod)] = fmt.Sprintf("%s: %s", sg.owner, sg.failure)
			} else {
				res.Moved = append(res.Moved, podutil.Key(pod))
			}
		}
	}
	return res
}

// group gathers the pods that can surge by owner, in the order of their names; why each other pod cannot goes to
// failed.
func (s *Surger) group(pods []*corev1.Pod, modes func(*corev1.Pod) stevedorev1.Replacement, failed map[string]string) []*surging {
	var out []*surging
	byOwner := map[string]*surging{}
	for _, pod := range sortedPods(pods) {
		key := ""
		if ref := metav1.GetControllerOf(pod); ref != nil {
			key = pod.Namespace + "/" + string(ref.UID)
		}
		sg := byOwner[key]
		var extra int32
		if sg != nil {
			extra = int32(len(sg.pods)) //nolint:gosec // G115: the pods of a few nodes
		}
		owner, why, _ := s.Check(pod, modes(pod), extra)
		if why != "" {
			failed[podutil.Key(pod)] = why
			continue
		}
		if sg == nil {
			sg = &surging{owner: owner, oldCosts: map[string][2]*string{}}
			byOwner[key] = sg
			out = append(out, sg)
		}
		sg.pods = append(sg.pods, pod)
	}
	return out
}

// end ends a surge that started: the owner is scaled back and, when the successors were Ready, the old pods'
// deletion confirmed; a surge that did not go through gets its pods' deletion costs back.
func (s *Surger) end(ctx context.Context, sg *surging, timeout time.Duration) {
	defer s.opts.Nominations.Forget(sg.owner.ReplicaSet)
	if !sg.ready && sg.failure == "" {
		sg.failure = fmt.Sprintf("its successors were not Ready within %s", timeout)
	}
	if err := s.scaleBack(ctx, sg); err != nil && sg.failure == "" {
		sg.failure = err.Error()
	}
	if sg.ready && sg.failure == "" {
		sg.failure = s.confirm(ctx, sg)
	}
	if sg.failure != "" {
		s.restoreCosts(ctx, sg)
	}
}

func annotation(pod *corev1.Pod, key string) *string {
	if v, ok := pod.Annotations[key]; ok {
		return &v
	}
	return nil
}

func sortedPods(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.Slice(out, func(i, j int) bool { return podutil.Key(out[i]) < podutil.Key(out[j]) })
	return out
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = podutil.Key(p)
	}
	return out
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
