/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package coscheduling is Stevedore's gang plugin for the kube-scheduler framework: the pods of a coscheduling
// PodGroup (the scheduling.x-k8s.io/pod-group label) are scheduled all or nothing. PreEnqueue holds a gang's pods
// until its PodGroup exists and at least minMember of them do; Permit holds each pod that found a node until
// minMember of the gang have one, then lets them all bind; when one of them goes back (its wait timed out after
// scheduleTimeoutSeconds, or a later step refused it), the others waiting go back too, so no part of a gang binds
// alone. It follows scheduler-plugins' Coscheduling, whose module cannot be built with this Kubernetes minor; the
// provisioner plans a gang's nodes whole (pkg/gang).
package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/gang"
)

// Name is the plugin's name in the scheduler configuration, the name scheduler-plugins gives its own.
const Name = "Coscheduling"

// ReasonGangWaiting is the event reason of a gang's pod that cannot be scheduled for what its gang lacks.
const ReasonGangWaiting = "GangWaiting"

var (
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
)

// Coscheduling is the plugin.
type Coscheduling struct {
	handle fwk.Handle
	// groups finds PodGroups; nil where the cluster does not serve them.
	groups gang.Groups
	// synced reports whether the PodGroup cache has listed them all.
	synced func() bool
	pods   corelisters.PodLister

	mu sync.Mutex
	// warned is the last warning event recorded for a pod, so that a pod requeued many times gets one.
	warned map[types.UID]string
}

// NewFactory returns the plugin's factory. The plugin watches PodGroups where the cluster serves them, through the
// informer factory the process shares (the controllers read the same PodGroups).
func NewFactory(shared *client.Shared) frameworkruntime.PluginFactory {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newPlugin(ctx, shared, h)
	}
}

func newPlugin(ctx context.Context, shared *client.Shared, h fwk.Handle) (*Coscheduling, error) {
	c := &Coscheduling{handle: h, pods: h.SharedInformerFactory().Core().V1().Pods().Lister(), synced: func() bool { return true },
		warned: map[types.UID]string{}}
	served, err := shared.Served(h.ClientSet().Discovery(), schedv1alpha1.SchemeGroupVersion.WithResource("podgroups"), true)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Discovering coscheduling PodGroups failed: counted as served")
	}
	if !served {
		klog.FromContext(ctx).Info("The cluster does not serve coscheduling PodGroups: pods labelled with a gang wait with an event saying so; install the PodGroup CRD (manifests/crds) to schedule gangs",
			"groupVersion", schedv1alpha1.SchemeGroupVersion.String())
		return c, nil
	}
	factory, err := shared.Informers(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	informer := factory.Coscheduling().V1alpha1().PodGroups()
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.activateGang(ctx, obj) },
		UpdateFunc: func(_, obj any) { c.activateGang(ctx, obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	c.groups = gang.ListerGroups{Lister: informer.Lister()}
	c.synced = informer.Informer().HasSynced
	factory.Start(ctx.Done())
	return c, nil
}

// Name returns the plugin's name.
func (c *Coscheduling) Name() string { return Name }

// PreEnqueue holds a gang's pod until its PodGroup exists and at least minMember of its pods do.
func (c *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := gang.CoschedulingOf(pod)
	if !ok {
		return nil
	}
	if !c.synced() {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the PodGroup cache to sync")
	}
	pg, err := gang.Lookup(c.groups, key)
	if err != nil {
		c.warn(pod, err.Error())
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	members, err := c.pods.Pods(key.Namespace).List(gang.Selector(key))
	if err != nil {
		return fwk.AsStatus(err)
	}
	live := 0
	for _, m := range members {
		if gang.Live(m) {
			live++
		}
	}
	if minMember := gang.MinMember(pg); live < minMember {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("gang %s has %d of the %d pods (minMember) it needs to start scheduling", key, live, minMember))
	}
	c.forget(pod.UID)
	klog.FromContext(ctx).V(4).Info("Gang pod may be scheduled", "pod", klog.KObj(pod), "gang", key, "pods", live)
	return nil
}

// Permit lets a gang's pod bind once minMember of the gang have a node (this one, those waiting here, those
// bound), and lets the ones waiting bind with it; until then it waits, at most the PodGroup's
// scheduleTimeoutSeconds.
func (c *Coscheduling) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := gang.CoschedulingOf(pod)
	if !ok {
		return nil, 0
	}
	pg, err := gang.Lookup(c.groups, key)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error()), 0
	}
	placed, err := c.placed(key, pod.UID)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	placed++ // this pod
	minMember := gang.MinMember(pg)
	logger := klog.FromContext(ctx)
	if placed >= minMember {
		logger.V(2).Info("Gang has nodes for its pods; letting them bind", "gang", key, "pod", klog.KObj(pod), "node", nodeName,
			"placed", placed, "minMember", minMember)
		c.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			if k, ok := gang.CoschedulingOf(wp.GetPod()); ok && k == key {
				wp.Allow(Name)
			}
		})
		return nil, 0
	}
	logger.V(4).Info("Gang pod waits for the rest of its gang", "gang", key, "pod", klog.KObj(pod), "node", nodeName,
		"placed", placed, "minMember", minMember)
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for gang %s: %d of its %d pods (minMember) have a node", key, placed, minMember)),
		time.Duration(pg.ScheduleTimeout()) * time.Second
}

// placed counts the live pods of the gang other than self that the scheduler's snapshot shows on a node: bound,
// binding, or waiting at Permit.
func (c *Coscheduling) placed(key gang.Key, self types.UID) (int, error) {
	nodes, err := c.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if k, ok := gang.CoschedulingOf(p); ok && k == key && p.UID != self && gang.Live(p) {
				n++
			}
		}
	}
	return n, nil
}

// Reserve does nothing: the plugin implements ReservePlugin for Unreserve.
func (c *Coscheduling) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve sends the gang's pods waiting at Permit back to the queue with a pod of theirs that did not bind
// (its wait timed out, a later plugin refused it), so that no part of the gang binds alone.
func (c *Coscheduling) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	key, ok := gang.CoschedulingOf(pod)
	if !ok {
		return
	}
	rejected := 0
	c.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := gang.CoschedulingOf(wp.GetPod()); ok && k == key && wp.GetPod().UID != pod.UID {
			if wp.Reject(Name, fmt.Sprintf("pod %s of gang %s did not bind", pod.Name, key)) {
				rejected++
			}
		}
	})
	if rejected > 0 {
		klog.FromContext(ctx).V(2).Info("A gang's pod did not bind: the gang's pods waiting for it go back to the queue", "gang", key,
			"pod", klog.KObj(pod), "node", nodeName, "sentBack", rejected)
	}
}

// EventsToRegister requeues a gang's pods held in PreEnqueue when another pod of the gang is created (the
// PodGroup's own changes activate them: activateGang).
func (c *Coscheduling) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}, QueueingHintFn: sameGang},
	}, nil
}

// sameGang queues a gang's pod when the pod added is of its gang.
func sameGang(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Pod, got %T", newObj)
	}
	mine, ok := gang.CoschedulingOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if theirs, ok := gang.CoschedulingOf(added); ok && theirs == mine {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// activateGang puts the pods of a PodGroup created or changed back in the active queue.
func (c *Coscheduling) activateGang(ctx context.Context, obj any) {
	pg, ok := obj.(*schedv1alpha1.PodGroup)
	if !ok {
		return
	}
	key := gang.Key{Namespace: pg.Namespace, Name: pg.Name}
	members, err := c.pods.Pods(key.Namespace).List(gang.Selector(key))
	if err != nil || len(members) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(members))
	for _, m := range members {
		if m.Spec.NodeName == "" {
			pods[m.Namespace+"/"+m.Name] = m
		}
	}
	klog.FromContext(ctx).V(4).Info("PodGroup changed: its pending pods go back to the active queue", "gang", key, "pods", len(pods))
	c.handle.Activate(klog.FromContext(ctx), pods)
}

// warn records a warning event on the pod, once per message.
func (c *Coscheduling) warn(pod *v1.Pod, msg string) {
	c.mu.Lock()
	if c.warned[pod.UID] == msg {
		c.mu.Unlock()
		return
	}
	if len(c.warned) > maxWarned {
		c.warned = map[types.UID]string{}
	}
	c.warned[pod.UID] = msg
	c.mu.Unlock()
	if r := c.handle.EventRecorder(); r != nil {
		r.Eventf(pod, nil, v1.EventTypeWarning, ReasonGangWaiting, "Scheduling", msg)
	}
}

// maxWarned bounds the pods whose last warning is remembered; past it, the memory starts over.
const maxWarned = 10000

func (c *Coscheduling) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.warned, uid)
	c.mu.Unlock()
}
