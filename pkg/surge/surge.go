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
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
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
	// ReplicaSet is the ReplicaSet that owns the pods (the Deployment's only active one).
	ReplicaSet *appsv1.ReplicaSet
}

func (o Owner) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// Check says how a pod on a node of a NodePool whose replacement is mode would move: by surging its owner (the
// owner is returned), or else why not. wait says the reason passes (the owner is rolling out, scaling or surging
// already): the pod had better wait for it than be evicted. extra is how many of the owner's pods the same move
// surges already (the HPA's maxReplicas must leave room for one more).
func (s *Surger) Check(pod *corev1.Pod, mode stevedorev1.Replacement, extra int32) (owner Owner, why string, wait bool) {
	if why := evicts(pod, mode); why != "" {
		return Owner{}, why, false
	}
	ref := metav1.GetControllerOf(pod)
	rs, err := s.opts.ReplicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return Owner{}, fmt.Sprintf("its ReplicaSet %s is not found", ref.Name), false
	}
	if rs.DeletionTimestamp != nil {
		return Owner{}, fmt.Sprintf("its ReplicaSet %s is being deleted", rs.Name), false
	}
	owner = Owner{Kind: kindReplicaSet, Namespace: rs.Namespace, Name: rs.Name, ReplicaSet: rs}
	replicas := ptrValue(rs.Spec.Replicas)
	if dref := metav1.GetControllerOf(rs); dref != nil {
		if dref.Kind != kindDeployment {
			return Owner{}, fmt.Sprintf("its ReplicaSet is controlled by a %s", dref.Kind), false
		}
		d, err := s.opts.Deployments.Deployments(rs.Namespace).Get(dref.Name)
		if err != nil || d.UID != dref.UID {
			return Owner{}, fmt.Sprintf("its Deployment %s is not found", dref.Name), false
		}
		if why, wait := s.rollingOut(d, rs); why != "" {
			return Owner{}, why, wait
		}
		owner = Owner{Kind: kindDeployment, Namespace: d.Namespace, Name: d.Name, ReplicaSet: rs}
		replicas = ptrValue(d.Spec.Replicas)
	} else {
		switch {
		case rs.Annotations[stevedorev1.AnnotationSurge] != "":
			return Owner{}, fmt.Sprintf("its ReplicaSet %s is surging already", rs.Name), true
		case rs.Status.ObservedGeneration < rs.Generation || rs.Status.Replicas != replicas:
			return Owner{}, fmt.Sprintf("its ReplicaSet %s is scaling", rs.Name), true
		}
	}
	if why := s.hpaRoom(owner, replicas+extra+1); why != "" {
		return Owner{}, why, false
	}
	return owner, "", false
}

// evicts says why a pod is evicted whatever its owner's state: its replacement (the pod's annotation, else mode) is
// Evict, or its owner is not a ReplicaSet.
func evicts(pod *corev1.Pod, mode stevedorev1.Replacement) string {
	if v, ok := pod.Annotations[stevedorev1.AnnotationReplacement]; ok {
		switch stevedorev1.Replacement(v) {
		case stevedorev1.ReplacementSurge, stevedorev1.ReplacementEvict:
			mode = stevedorev1.Replacement(v)
		default:
			return fmt.Sprintf("its %s annotation %q is neither Surge nor Evict", stevedorev1.AnnotationReplacement, v)
		}
	}
	if mode == stevedorev1.ReplacementEvict {
		return "its replacement is Evict"
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		return "a pod with no owner cannot surge"
	case ref.Kind == "StatefulSet":
		return "a StatefulSet's pod keeps its identity and cannot surge"
	case ref.Kind != kindReplicaSet || !strings.HasPrefix(ref.APIVersion, "apps/"):
		return fmt.Sprintf("a %s's pod cannot surge", ref.Kind)
	}
	return ""
}

// rollingOut says why a Deployment cannot surge now, and whether that passes: a surge under way, or a rollout
// or scaling under way (a surge would land in whichever ReplicaSet the Deployment controller chooses, and fight
// it) pass; a paused Deployment or one being deleted does not.
func (s *Surger) rollingOut(d *appsv1.Deployment, rs *appsv1.ReplicaSet) (string, bool) {
	switch {
	case d.DeletionTimestamp != nil:
		return fmt.Sprintf("its Deployment %s is being deleted", d.Name), false
	case d.Spec.Paused:
		return fmt.Sprintf("its Deployment %s is paused", d.Name), false
	case d.Annotations[stevedorev1.AnnotationSurge] != "":
		return fmt.Sprintf("its Deployment %s is surging already", d.Name), true
	}
	want := ptrValue(d.Spec.Replicas)
	st := d.Status
	// status.replicas counts the pods of every ReplicaSet of the Deployment: equal to the updated ones, no older
	// ReplicaSet has pods
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want {
		return fmt.Sprintf("its Deployment %s is rolling out or scaling (%d of %d replicas updated, %d in all)", d.Name, st.UpdatedReplicas,
			want, st.Replicas), true
	}
	if st.AvailableReplicas < want {
		// the status may lag behind the pods; a surge waits for every pod of the ReplicaSet to be Ready, which a
		// failing pod never is
		if ready := s.readyPods(rs, st.AvailableReplicas); ready < want {
			return fmt.Sprintf("its Deployment %s has %d of %d replicas Ready", d.Name, ready, want), false
		}
	}
	return "", false
}

// readyPods counts the ReplicaSet's Ready pods from the pod cache (the Deployment's status lags behind it), or is
// fallback without a pod cache. A count short of the ReplicaSet's replicas is kept until the ReplicaSet changes
// (its status follows its pods), so that a disruption pass asking for every pod of a Deployment of thousands that
// is still coming up does not walk the namespace's pods for each; a count that lets a surge start is never
// reused.
func (s *Surger) readyPods(rs *appsv1.ReplicaSet, fallback int32) int32 {
	if s.opts.Pods == nil {
		return fallback
	}
	s.mu.Lock()
	c, ok := s.ready[rs.UID]
	s.mu.Unlock()
	if ok && c.version == rs.ResourceVersion {
		return c.ready
	}
	ready, _, err := s.podsOf(rs)
	if err != nil {
		return fallback
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ready, rs.UID)
	if len(s.ready) > maxReadyCounts {
		clear(s.ready) // ReplicaSets come and go: keep the memo from growing without bound
	}
	if ready < ptrValue(rs.Spec.Replicas) {
		s.ready[rs.UID] = readyCount{version: rs.ResourceVersion, ready: ready}
	}
	return ready
}

// maxReadyCounts bounds the ReplicaSets readyPods remembers.
const maxReadyCounts = 4096

// podsOf counts the ReplicaSet's pods in the pod cache that are neither finished nor being deleted (live), and
// those of them bound and Ready.
func (s *Surger) podsOf(rs *appsv1.ReplicaSet) (ready, live int32, err error) {
	pods, err := s.opts.Pods.Pods(rs.Namespace).List(labels.Everything())
	if err != nil {
		return 0, 0, err
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || !metav1.IsControlledBy(pod, rs) || podutil.Finished(pod) {
			continue
		}
		live++
		if pod.Spec.NodeName != "" && podutil.Ready(pod) {
			ready++
		}
	}
	return ready, live, nil
}

// hpaRoom says why an HPA would undo a scale to replicas: it is above the HPA's maxReplicas.
func (s *Surger) hpaRoom(o Owner, replicas int32) string {
	if s.opts.HPAs == nil {
		return ""
	}
	hpas, err := s.opts.HPAs.HorizontalPodAutoscalers(o.Namespace).List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, h := range hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind == o.Kind && ref.Name == o.Name && replicas > h.Spec.MaxReplicas {
			return fmt.Sprintf("HorizontalPodAutoscaler %s is at its maxReplicas %d", h.Name, h.Spec.MaxReplicas)
		}
	}
	return ""
}

// Waiting lists the pods ("namespace/name") whose owner cannot surge now but will once what it does passes (a
// rollout, a scaling or another surge under way), with why: moving them now would evict them.
func (s *Surger) Waiting(pods []*corev1.Pod, modes func(*corev1.Pod) stevedorev1.Replacement) map[string]string {
	out := map[string]string{}
	for _, pod := range sortedPods(pods) {
		if _, why, wait := s.Check(pod, modes(pod), 0); wait {
			out[podutil.Key(pod)] = why
		}
	}
	return out
}

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

// start ranks the owner's moving pods first for deletion, records the surge on the owner, expects its successors
// on the nodes targets plans for them, and scales it up.
func (s *Surger) start(ctx context.Context, sg *surging, targets map[types.UID]string) error {
	for _, pod := range sg.pods {
		sg.oldCosts[podutil.Key(pod)] = [2]*string{annotation(pod, deletioncost.AnnotationDeletionCost), annotation(pod, deletioncost.AnnotationManaged)}
		cost := strconv.Itoa(deletioncost.LeavingCost)
		if err := s.patchCost(ctx, pod, &cost, &cost); err != nil {
			return fmt.Errorf("ranking pod %s/%s first for deletion: %w", pod.Namespace, pod.Name, err)
		}
	}
	scale, err := s.getScale(ctx, sg.owner)
	if err != nil {
		return err
	}
	sg.from = scale.Spec.Replicas
	sg.to = sg.from + int32(len(sg.pods)) //nolint:gosec // G115: the pods of a few nodes
	if err := s.annotate(ctx, sg.owner, fmt.Sprintf("%d:%d", sg.from, sg.to)); err != nil {
		return fmt.Errorf("recording the surge on %s: %w", sg.owner, err)
	}
	for _, pod := range sg.pods {
		if node := targets[pod.UID]; node != "" {
			sg.nodes = append(sg.nodes, node)
		}
	}
	s.opts.Nominations.Expect(sg.owner.ReplicaSet, sg.nodes)
	// the resourceVersion read is the precondition: a conflict (the owner's status written meanwhile) reads again,
	// and the replicas must still be those recorded, or the surge's when an update whose answer was lost went through
	sent := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := s.getScale(ctx, sg.owner)
		if err != nil {
			return err
		}
		switch {
		case sent && scale.Spec.Replicas == sg.to:
			return nil
		case scale.Spec.Replicas != sg.from:
			return fmt.Errorf("its replicas changed to %d meanwhile", scale.Spec.Replicas)
		}
		scale.Spec.Replicas = sg.to
		sent = true
		return s.updateScale(ctx, sg.owner, scale)
	})
	if err != nil {
		s.opts.Nominations.Forget(sg.owner.ReplicaSet)
		// the scale-up may have gone through unanswered: the owner goes back to its replicas (a failure here is
		// retried by Recover, as the record stays)
		if sent {
			if berr := s.scaleBack(ctx, sg); berr != nil {
				klog.FromContext(ctx).Error(berr, "Scaling back a surge that did not start; Recover retries it", "owner", sg.owner.String())
			}
		} else {
			_ = s.annotate(ctx, sg.owner, "")
		}
		return fmt.Errorf("scaling %s to %d: %w", sg.owner, sg.to, err)
	}
	return nil
}

// successorsReady reports whether every pod of the owner's ReplicaSet is Ready and there are as many as the
// surge asked for (the ReplicaSet controller then deletes the lowest-cost pods, the old ones); or why the surge
// stops (someone else changed the owner's scale).
func (s *Surger) successorsReady(sg *surging) (bool, string) {
	want, ok := s.currentReplicas(sg.owner)
	if !ok {
		return false, "it was deleted"
	}
	switch want {
	case sg.to:
	case sg.from:
		return false, "" // the cache has not seen the scale-up yet (or it was undone: the timeout ends the wait)
	default:
		return false, fmt.Sprintf("its replicas were changed to %d while it surged", want)
	}
	ready, live, err := s.podsOf(sg.owner.ReplicaSet)
	return err == nil && ready == live && ready >= sg.to, ""
}

// currentReplicas is the owner's spec.replicas as the informers see it.
func (s *Surger) currentReplicas(o Owner) (int32, bool) {
	if o.Kind == kindDeployment {
		d, err := s.opts.Deployments.Deployments(o.Namespace).Get(o.Name)
		if err != nil {
			return 0, false
		}
		return ptrValue(d.Spec.Replicas), true
	}
	rs, err := s.opts.ReplicaSets.ReplicaSets(o.Namespace).Get(o.Name)
	if err != nil {
		return 0, false
	}
	return ptrValue(rs.Spec.Replicas), true
}

// scaleBackBackoff paces the attempts to scale an owner back (about 20 seconds in all); Recover retries after it.
func scaleBackBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 8}
}

// scaleBack returns the owner to the replicas it had, if they are still the surge's (someone else's change
// stands), and removes the surge's record.
func (s *Surger) scaleBack(ctx context.Context, sg *surging) error {
	err := wait.ExponentialBackoffWithContext(ctx, scaleBackBackoff(), func(ctx context.Context) (bool, error) {
		scale, err := s.getScale(ctx, sg.owner)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		switch scale.Spec.Replicas {
		case sg.to:
		case sg.from:
			return true, nil // back already (an update whose answer was lost)
		default:
			klog.FromContext(ctx).Info("Not scaling back a surge: the replicas were changed meanwhile", "owner", sg.owner.String(),
				"replicas", scale.Spec.Replicas, "surge", sg.to)
			return true, nil
		}
		scale.Spec.Replicas = sg.from
		err = s.updateScale(ctx, sg.owner, scale)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("scaling %s back to %d: %w", sg.owner, sg.from, err)
	}
	if err := s.annotate(ctx, sg.owner, ""); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the surge's record from %s: %w", sg.owner, err)
	}
	return nil
}

// confirm waits for the ReplicaSet controller to delete the old pods; it says why not when it deleted others.
func (s *Surger) confirm(ctx context.Context, sg *surging) string {
	gone := func(pod *corev1.Pod) bool {
		cur, err := s.opts.Pods.Pods(pod.Namespace).Get(pod.Name)
		return err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil
	}
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, s.opts.Interval, 30*time.Second, true, func(context.Context) (bool, error) {
		left = left[:0]
		for _, pod := range sg.pods {
			if !gone(pod) {
				left = append(left, pod.Name)
			}
		}
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		return fmt.Sprintf("its ReplicaSet did not delete %s after the scale-down", strings.Join(left, ", "))
	}
	return ""
}

// Recover scales back the surges no Move of this process is running: left by a process that stopped, or whose
// scale-back failed (the API server unreachable). Owners recorded as surging whose replicas are still the surge's
// return to what they had; the records are removed. It reads the informers' caches and writes only where a record
// is found.
func (s *Surger) Recover(ctx context.Context) {
	var owners []Owner
	if ds, err := s.opts.Deployments.List(labels.Everything()); err == nil {
		for _, d := range ds {
			if d.Annotations[stevedorev1.AnnotationSurge] != "" {
				owners = append(owners, Owner{Kind: kindDeployment, Namespace: d.Namespace, Name: d.Name})
			}
		}
	}
	if rss, err := s.opts.ReplicaSets.List(labels.Everything()); err == nil {
		for _, rs := range rss {
			if rs.Annotations[stevedorev1.AnnotationSurge] != "" && metav1.GetControllerOf(rs) == nil {
				owners = append(owners, Owner{Kind: kindReplicaSet, Namespace: rs.Namespace, Name: rs.Name})
			}
		}
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].String() < owners[j].String() })
	for _, o := range owners {
		// held while it is recovered, so that no Move starts surging it meanwhile
		if !s.hold(o) {
			continue
		}
		s.recover(ctx, o)
		s.release(o)
	}
}

func (s *Surger) recover(ctx context.Context, o Owner) {
	logger := klog.FromContext(ctx)
	// the cache may still show the record of a surge that just ended: the owner itself says
	raw, err := s.recorded(ctx, o)
	if err != nil || raw == "" {
		return
	}
	var from, to int32
	if _, err := fmt.Sscanf(raw, "%d:%d", &from, &to); err != nil {
		logger.Error(err, "A surge record is not understood; removing it", "owner", o.String(), "record", raw)
		_ = s.annotate(ctx, o, "")
		return
	}
	if err := s.scaleBack(ctx, &surging{owner: o, from: from, to: to}); err != nil {
		logger.Error(err, "Scaling back a surge no command holds", "owner", o.String())
		return
	}
	logger.Info("Scaled back a surge no command holds", "owner", o.String(), "replicas", from)
}

func (s *Surger) recorded(ctx context.Context, o Owner) (string, error) {
	var meta metav1.Object
	var err error
	if o.Kind == kindDeployment {
		meta, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	} else {
		meta, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", err
	}
	return meta.GetAnnotations()[stevedorev1.AnnotationSurge], nil
}

func (s *Surger) getScale(ctx context.Context, o Owner) (*autoscalingv1.Scale, error) {
	if o.Kind == kindDeployment {
		return s.opts.Kube.AppsV1().Deployments(o.Namespace).GetScale(ctx, o.Name, metav1.GetOptions{})
	}
	return s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).GetScale(ctx, o.Name, metav1.GetOptions{})
}

func (s *Surger) updateScale(ctx context.Context, o Owner, scale *autoscalingv1.Scale) error {
	var err error
	if o.Kind == kindDeployment {
		_, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).UpdateScale(ctx, o.Name, scale, metav1.UpdateOptions{})
	} else {
		_, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).UpdateScale(ctx, o.Name, scale, metav1.UpdateOptions{})
	}
	return err
}

// annotate sets the owner's surge record (removes it when value is "").
func (s *Surger) annotate(ctx context.Context, o Owner, value string) error {
	v := "null"
	if value != "" {
		v = strconv.Quote(value)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, stevedorev1.AnnotationSurge, v))
	var err error
	if o.Kind == kindDeployment {
		_, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// patchCost sets (nil: removes) a pod's deletion cost and Stevedore's record of it.
func (s *Surger) patchCost(ctx context.Context, pod *corev1.Pod, cost, managed *string) error {
	value := func(v *string) string {
		if v == nil {
			return "null"
		}
		return strconv.Quote(*v)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s,%q:%s}}}`, deletioncost.AnnotationDeletionCost, value(cost),
		deletioncost.AnnotationManaged, value(managed)))
	_, err := s.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// restoreCosts puts back the deletion costs of the pods of a surge that did not go through.
func (s *Surger) restoreCosts(ctx context.Context, sg *surging) {
	for _, pod := range sg.pods {
		old, ok := sg.oldCosts[podutil.Key(pod)]
		if !ok {
			continue
		}
		if err := s.patchCost(ctx, pod, old[0], old[1]); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Restoring a pod's deletion cost after a surge that did not go through", "pod", klog.KObj(pod))
		}
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
