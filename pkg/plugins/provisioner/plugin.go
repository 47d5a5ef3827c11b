/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package provisioner adapts Stevedore's provisioning to the kube-scheduler framework. It is thin: the plugin
// receives the pods no node fits (PostFilter), keeps the in-flight capacity accounting exact (Reserve,
// Unreserve), holds pods bound for nodes that are still initializing (Permit) and puts the pods whose planned node
// is ready first in the scheduling queue (ReadyNodeFirst, a queue sort); the decisions are made in
// pkg/provision, which the host hands the plugin as its Backend (Options.Build).
package provisioner

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/decision"
	"github.com/stevedore-dev/stevedore/pkg/floor"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
)

// Name is the plugin's name in the scheduler configuration.
const Name = config.PluginName

// Status messages of the plugin's extension points (formats take the node and NodeClaim named).
const (
	msgNominated      = "waiting for node %s, launched for this pod (NodeClaim %s)"
	msgWaitingLaunch  = "waiting for NodeClaim %s to launch a node for this pod"
	msgPlanning       = "planning a new node for this pod"
	msgNoNodePool     = "no NodePool can launch a node for this pod: "
	msgOnlyComingUp   = "every node is one Stevedore is bringing up for other pods"
	msgNodeInitialize = "node %s is initializing"
)

// Provisioner is the scheduler plugin.
type Provisioner struct {
	handle fwk.Handle
	args   config.ProvisionerArgs
	shared *Shared
}

// Backend is what the plugin adapts to the framework: the provisioner's answers and accounting.
type Backend interface {
	// Consider keeps a pod no node fits on the node planned for it, puts it on a node being launched with room,
	// or batches it for the next solve. refusedBy names the plugin that refused a node to the pod, and why.
	Consider(ctx context.Context, pod *v1.Pod, refusedBy func(node string) (plugin, message string)) decision.Decision
	// NodesFor narrows the nodes the scheduler evaluates a pod on (restricted false: every node).
	NodesFor(pod *v1.Pod, nodes []fwk.NodeInfo) (names sets.Set[string], restricted bool)
	// PlannedClaim names the NodeClaim a pod is planned on ("" if none).
	PlannedClaim(uid types.UID) string
	// RoomRefused says why a node's room is not the pod's ("" if it is); roomChecked says NodesFor already
	// checked the room of the nodes it named, in this scheduling cycle.
	RoomRefused(pod *v1.Pod, ni fwk.NodeInfo, roomChecked bool) string
	// SpotRefused says why the pod may not go on a spot node ("" if it may): its workload's on-demand floor.
	SpotRefused(pod *v1.Pod) string
	PodReserved(pod *v1.Pod, node string)
	PodUnreserved(uid types.UID)
	PodBound(ctx context.Context, uid types.UID, node string)
	// IsNodeInitializing reports whether a node Stevedore launched is still initializing.
	IsNodeInitializing(node string) bool
	// NodeReadyFor reports whether the pod is planned on a node Stevedore launched that finished initializing.
	NodeReadyFor(uid types.UID) bool
	// Hold says why a pod waits before entering the scheduling queue ("" if it does not): a disruption's
	// successor is being nominated to the node its move planned.
	Hold(ctx context.Context, pod *v1.Pod) string
	// Admit says why a pod waits before entering the scheduling queue ("" if it goes now): a pod no node has room
	// for is planned without a scheduling cycle, and a pod planned on a NodeClaim waits until its node is ready.
	// Called with the queue's lock held.
	Admit(ctx context.Context, pod *v1.Pod) string
	// AwaitsNode reports whether the pod waits for a plan, or for the node planned for it to be ready: no room
	// freed elsewhere helps it.
	AwaitsNode(pod *v1.Pod) bool
}

// BuildFunc builds the backend once for the process, with the first plugin instance, while the scheduler sets up
// (before its informers start, so that every informer the backend needs is registered in time). onInitialized
// is to be called with a node's name once it finished initializing, to let the pods held in Permit bind.
type BuildFunc func(ctx context.Context, h fwk.Handle, args config.ProvisionerArgs, onInitialized func(node string)) (Backend, error)

var (
	_ fwk.QueueSortPlugin   = &ReadyNodeFirst{}
	_ fwk.PreEnqueuePlugin  = &Provisioner{}
	_ fwk.PreFilterPlugin   = &Provisioner{}
	_ fwk.FilterPlugin      = &Provisioner{}
	_ fwk.PostFilterPlugin  = &Provisioner{}
	_ fwk.ReservePlugin     = &Provisioner{}
	_ fwk.PermitPlugin      = &Provisioner{}
	_ fwk.PostBindPlugin    = &Provisioner{}
	_ fwk.EnqueueExtensions = &Provisioner{}
	_ fwk.SignPlugin        = &Provisioner{}
)

// Options are what the hosting process gives the plugin.
type Options struct {
	// Env looks up environment variables (argument defaults). Default os.Getenv.
	Env func(string) string
	// Build builds the backend. Required.
	Build BuildFunc
}

// NewFactories returns the factories of the two plugins to register with the scheduler: the Provisioner and its
// queue sort, ReadyNodeFirst. All the instances they make share one Shared.
func NewFactories(opts Options) (prov, queueSort frameworkruntime.PluginFactory) {
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	// The scheduler's event recorder resolves references through client-go's scheme; NodeClaim events need it.
	utilruntime.Must(stevedorev1.AddToScheme(clientgoscheme.Scheme))
	utilruntime.Must(schedv1alpha1.AddToScheme(clientgoscheme.Scheme))      // and PodGroup events (a gang's node interrupted)
	utilruntime.Must(autoscalingv1.AddToScheme(clientgoscheme.Scheme))      // and ProvisioningRequest events
	utilruntime.Must(autoscalingv1beta1.AddToScheme(clientgoscheme.Scheme)) // and CapacityBuffer events
	shared := &Shared{opts: opts, waiting: map[types.UID]waitingPod{}}
	prov = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := config.Decode(obj, opts.Env)
		if err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("Provisioner plugin configured", "profile", h.ProfileName(), "clusterName", args.ClusterName,
			"region", args.Region, "batchIdleDuration", args.BatchIdleDuration.Duration,
			"batchMaxDuration", args.BatchMaxDuration.Duration, "interruptionQueue", args.InterruptionQueue)
		if err := shared.init(ctx, h, args); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		return &Provisioner{handle: h, args: args, shared: shared}, nil
	}
	queueSort = func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
		return &ReadyNodeFirst{shared: shared}, nil
	}
	return prov, queueSort
}

// Name returns the plugin's name.
func (p *Provisioner) Name() string { return Name }

// QueueSortName is the queue sort plugin's name in the scheduler configuration.
const QueueSortName = "ReadyNodeFirst"

// ReadyNodeFirst is the scheduling queue's order: the default PrioritySort's (higher priority first, then the
// time each entry joined the queue) with one exception among equal priorities: pods planned on a node Stevedore
// launched that finished initializing go first. A pod re-joins the queue when its first attempt fails, behind
// every pod of the burst not tried yet; without this, the nodes launched for a burst of thousands of pods stay
// empty until the scheduler has tried each pod once. The scheduler requires the same queue sort in every profile:
// it serves pods of every profile, and knows nothing of their plans unless the Provisioner runs.
type ReadyNodeFirst struct {
	shared *Shared
}

// Name returns the plugin's name.
func (q *ReadyNodeFirst) Name() string { return QueueSortName }

// Less reports whether entry a goes before entry b.
func (q *ReadyNodeFirst) Less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	if ra, rb := q.nodeReadyFor(a), q.nodeReadyFor(b); ra != rb {
		return ra
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// nodeReadyFor reports whether the queue entry is a pod planned on a node that finished initializing.
func (q *ReadyNodeFirst) nodeReadyFor(e fwk.QueuedEntityInfo) bool {
	pi, ok := e.(interface{ GetPodInfo() fwk.PodInfo })
	if !ok || q.shared == nil || q.shared.prov == nil || pi.GetPodInfo() == nil {
		return false
	}
	return q.shared.prov.NodeReadyFor(pi.GetPodInfo().GetPod().UID)
}

// PreEnqueue holds the successor of a pod that disruption moves make-before-break until it is nominated to the
// node the move planned for it (the scheduler then tries that node first, and counts the pod there meanwhile), and
// plans the pods no node has room for before their first scheduling cycle: such a pod waits here, with nothing
// written on it, until the node launched for it is ready, then goes for the one cycle that binds it
// (Backend.Admit). A pod some node may take goes straight on.
func (p *Provisioner) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	why := p.shared.prov.Hold(ctx, pod)
	if why == "" {
		why = p.shared.prov.Admit(ctx, pod)
	}
	if u := p.shared.unheld; u != nil {
		if why != "" {
			u.Held(pod)
		} else {
			u.Passed(pod)
		}
	}
	if why != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// PostFilter is called for a pod that no existing node fits. The pod is kept on the node launching for it,
// put on a launching node with room, or batched for the next solve; the scheduler then waits for the node to
// register. Only a pod no NodePool can launch a node for is left to preemption.
func (p *Provisioner) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	refusedBy := func(node string) (plugin, message string) {
		if st := statuses.Get(node); st != nil && !st.IsSuccess() {
			if st.Plugin() == "" {
				return "unknown", st.Message()
			}
			return st.Plugin(), st.Message()
		}
		return "", ""
	}
	d := p.shared.prov.Consider(ctx, pod, refusedBy)
	switch d.Kind {
	case decision.Nominated:
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: d.NodeName, NominatingMode: fwk.ModeOverride}},
			fwk.NewStatus(fwk.Success, fmt.Sprintf(msgNominated, d.NodeName, d.Claim))
	case decision.Waiting:
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeNoop}},
			fwk.NewStatus(fwk.Success, fmt.Sprintf(msgWaitingLaunch, d.Claim))
	case decision.Batched:
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeNoop}},
			fwk.NewStatus(fwk.Success, msgPlanning)
	default:
		return nil, fwk.NewStatus(fwk.Unschedulable, msgNoNodePool+d.Reason)
	}
}

// PreFilter narrows the nodes the scheduler evaluates a pod on to those Provisioner.NodesFor names: for a pod
// planned on a node still coming, that node and the nodes Stevedore did not launch (Filter refuses it every other
// node); for a pod not planned, every node but those Stevedore launched that are still initializing (their room
// is planned; the next solve plans pods into what is left). Without it, a burst's scheduling cycles run the
// filters, with each node's nominated pods added, on hundreds of nodes that cannot take the pod.
func (p *Provisioner) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if podutil.IsDaemonSetPod(pod) {
		return nil, nil
	}
	if p.shared.prov.PlannedClaim(pod.UID) == "" {
		// NodesFor weighs the room of every node for a pod planned nowhere: Filter need not again
		state.Write(roomCheckedKey, roomChecked{})
	}
	if why := p.shared.prov.SpotRefused(pod); why != "" {
		state.Write(onDemandOnlyKey, onDemandOnly(why))
	}
	if c, ok, _ := poolcap.Of(pod); ok {
		state.Write(poolCapKey, poolCapOf(pod, c, nodes))
	}
	names, restricted := p.shared.prov.NodesFor(pod, nodes)
	if !restricted {
		return nil, nil
	}
	if names.Len() == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msgOnlyComingUp)
	}
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// SignPod signs a pod with the NodeClaim it is planned on: PreFilter and Filter answer the same for pods of one
// workload planned on the same NodeClaim, and differently for others. Without a signature from every filtering
// plugin, the scheduler turns off opportunistic batching for the whole profile.
func (p *Provisioner) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if podutil.IsDaemonSetPod(pod) {
		return []fwk.SignFragment{{Key: Name, Value: "daemonset"}}, nil
	}
	if _, ok := pod.Annotations[floor.Annotation]; ok || poolcap.Has(pod) {
		// where a pod may go depends on where its workload's pods went before it
		return []fwk.SignFragment{{Key: Name, Value: "floor:" + string(pod.UID)}}, nil
	}
	return []fwk.SignFragment{{Key: Name, Value: "planned:" + p.shared.prov.PlannedClaim(pod.UID)}}, nil
}

// roomCheckedKey marks, in a scheduling cycle's state, that PreFilter weighed the room every node keeps for the
// pods planned on it (the pod is planned nowhere): Filter, which the scheduler runs on each of those nodes after
// copying it with its nominated pods, need not weigh it again. In a burst of thousands of pods, weighing it twice
// (with a copy of each nominated pod from the scheduling queue) was a tenth of the scheduler's CPU.
const roomCheckedKey fwk.StateKey = Name + "/roomChecked"

type roomChecked struct{}

func (roomChecked) Clone() fwk.StateData { return roomChecked{} }

// onDemandOnlyKey marks, in a scheduling cycle's state, that the pod's workload's on-demand floor needs it on
// on-demand capacity (package floor), and why: Filter refuses it every node not known to be on-demand.
const onDemandOnlyKey fwk.StateKey = Name + "/onDemandOnly"

type onDemandOnly string

func (o onDemandOnly) Clone() fwk.StateData { return o }

// poolCapKey holds, in a scheduling cycle's state, the pod's cap per Spot pool and how many pods of its workload
// each Spot pool runs (bound and assumed, package poolcap): Filter refuses it the nodes of a pool at its cap, and
// nodes whose pool is not known.
const poolCapKey fwk.StateKey = Name + "/poolCap"

type poolCap struct {
	capacity int
	counts   poolcap.Counts
}

// Clone returns the state itself: it is not changed once written.
func (c *poolCap) Clone() fwk.StateData { return c }

// poolCapOf counts the pods of pod's workload that carry the cap, other than pod, per Spot pool over the
// scheduler's nodes.
func poolCapOf(pod *v1.Pod, capacity int, nodes []fwk.NodeInfo) *poolCap {
	key, _ := poolcap.KeyOf(pod)
	out := &poolCap{capacity: capacity, counts: poolcap.Counts{}}
	for _, ni := range nodes {
		pool, kind := poolcap.PoolOf(ni.Node())
		if kind != poolcap.Spot {
			continue
		}
		for _, pi := range ni.GetPods() {
			q := pi.GetPod()
			if q.UID == pod.UID || q.Namespace != pod.Namespace {
				continue
			}
			if k, ok := poolcap.KeyOf(q); ok && k == key {
				out.counts[pool]++
			}
		}
	}
	return out
}

// PreFilterExtensions returns nil: PreFilter's state does not depend on the other pods of a node.
func (p *Provisioner) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps, on a node Stevedore launched, the room of the pods planned there that are not bound yet: its
// DaemonSet pods (the cluster's default scheduler places them, so a pod of this profile could otherwise take their
// room) and the planned pods the scheduler does not count as nominated there; and keeps a pod planned on a node
// still coming off the nodes planned for others.
func (p *Provisioner) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if podutil.IsDaemonSetPod(pod) {
		return nil
	}
	_, err := state.Read(roomCheckedKey)
	if why := p.shared.prov.RoomRefused(pod, ni, err == nil); why != "" {
		return fwk.NewStatus(fwk.Unschedulable, why)
	}
	if why, err := state.Read(onDemandOnlyKey); err == nil && !floor.OnDemand(ni.Node()) {
		return fwk.NewStatus(fwk.Unschedulable, string(why.(onDemandOnly)))
	}
	if c, err := state.Read(poolCapKey); err == nil {
		if why := poolcap.Refused(c.(*poolCap).capacity, c.(*poolCap).counts, ni.Node()); why != "" {
			return fwk.NewStatus(fwk.Unschedulable, why)
		}
	}
	return nil
}

// Reserve records the node the pod is binding to: until it is bound, provisioning counts it there. The slot planned
// for it on a launching node stays its own until then.
func (p *Provisioner) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	p.shared.prov.PodReserved(pod, nodeName)
	return nil
}

// Unreserve undoes Reserve: a pod that does not bind keeps its planned slot and comes back through PostFilter.
func (p *Provisioner) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	p.shared.prov.PodUnreserved(pod.UID)
}

// PostBind releases the slot planned for the pod on a launching node: it is bound now.
func (p *Provisioner) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	p.shared.prov.PodBound(ctx, pod.UID, nodeName)
	metrics.PodsBoundDuration.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
}

// Permit holds a pod bound for a node that registered but is still initializing (its startup taints or
// readiness pending) until it is ready, at most permitTimeout.
func (p *Provisioner) Permit(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	if !p.shared.prov.IsNodeInitializing(nodeName) {
		return nil, 0
	}
	p.shared.mu.Lock()
	p.shared.waiting[pod.UID] = waitingPod{node: nodeName, handle: p.handle, since: time.Now()}
	p.shared.mu.Unlock()
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf(msgNodeInitialize, nodeName)), p.args.PermitTimeout.Duration
}

// EventsToRegister lists the cluster events that may let a pod this plugin held back bind, each with a hint that
// requeues the pod only when the event may help: a pod leaving a node (room freed). What Stevedore's own state
// holds a pod for (the node planned for it coming up and initializing, its plan dropped, the room kept for others)
// changes with no cluster event the queue could match to the pod: the provisioner puts such a pod back in the
// queue itself (SchedulingQueue.Activate) when it changes. Registering node events as well had the queue weigh
// every pod held before it, thousands in a burst, at each of the hundreds of node registrations and updates.
//
// With kube-scheduler's SchedulerPreQueueingHints gate on (Stevedore's default), the queue still weighed the held
// pods at node events and binds, for the other plugins' sake, though it never moved them: the plugin narrows those
// events to the pods it does not hold (unheldPods), and its own hint for them changes nothing.
func (p *Provisioner) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.boundPodDeleted},
	}
	if p.shared != nil && p.shared.unheld != nil {
		narrow := p.shared.unheld.PreQueueingHint
		events = append(events,
			fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: skip, PreQueueingHintFn: narrow},
			fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, QueueingHintFn: skip, PreQueueingHintFn: narrow})
	}
	return events, nil
}

// skip is the plugin's hint for the events it registers only to narrow: they never help a pod it refused (the
// provisioner wakes those itself), as when it did not register them.
func skip(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.QueueSkip, nil }

// boundPodDeleted queues the pod when a pod bound to a node is deleted (its room is free now), unless the pod waits
// for a plan or for the node planned for it (Backend.AwaitsNode): in a burst thousands do, and each pod leaving
// would send them all through PreEnqueue again.
func (p *Provisioner) boundPodDeleted(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	gone, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Pod, got %T", oldObj)
	}
	if gone.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	if p.shared != nil && p.shared.prov != nil && p.shared.prov.AwaitsNode(pod) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
