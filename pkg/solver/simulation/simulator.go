/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// Plugins that run in the simulation are the default profile's PreFilter and Filter plugins except those that
// decide about things a new node cannot change: dynamic resource claims (Stevedore does not provision devices)
// and the scheduler's own bookkeeping ones.
var excludedPlugins = []string{names.DynamicResources, names.DefaultPreemption, names.SchedulingGates}

// Simulator runs PreFilter and Filter plugins of the default scheduler profile over a Snapshot.
type Simulator struct {
	// fw runs every PreFilter plugin from scratch; light runs all but the incremental ones, whose state comes
	// from the snapshot's incremental cache. Both run the same Filter plugins.
	fw, light framework.Framework
	snapshot  *swappableLister
	// spread and affinity are the incremental plugins, built like the framework's own.
	spread, affinity fwk.PreFilterPlugin
	opts             Options
	// Counts of PreFilter and Filter runs, for benchmarks; FullPreFilters counts the PreFilter runs over the whole
	// snapshot (not from the incremental cache).
	PreFilters, Filters, FullPreFilters int
	// Stale counts Filter calls given a lent state the snapshot had changed since (computed again); Mismatches
	// are the differences CheckIncremental found.
	Stale      int
	Mismatches []string
}

// Options give the simulator what the plugins read besides nodes and pods: volumes, storage classes and CSI
// nodes come from the informer factory (started by the caller); an offline simulator gets an empty fake one.
type Options struct {
	Informers informers.SharedInformerFactory
	Client    clientset.Interface
	// FromScratch computes every PreFilter state from the whole snapshot, without the incremental cache.
	FromScratch bool
	// CheckIncremental compares every state the incremental cache lends with one computed from scratch, on every
	// node of the snapshot, and records the differences in Mismatches (tests).
	CheckIncremental bool
}

// New builds a simulator over snapshot.
func New(ctx context.Context, snapshot *Snapshot, opts Options) (*Simulator, error) {
	// The framework records plugin metrics through the scheduler's metric vectors, which must exist even when no
	// scheduler runs in the process (the plan command, unit tests).
	metrics.Register() // idempotent
	if opts.Client == nil {
		opts.Client = fake.NewClientset()
	}
	if opts.Informers == nil {
		opts.Informers = informers.NewSharedInformerFactory(opts.Client, 0)
	}
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := cfg.Profiles[0].DeepCopy()
	profile.SchedulerName = "stevedore-simulation"
	for _, name := range excludedPlugins {
		disable(&profile.Plugins.PreFilter, name)
		disable(&profile.Plugins.Filter, name)
		disable(&profile.Plugins.MultiPoint, name)
		disable(&profile.Plugins.PostFilter, name)
		disable(&profile.Plugins.PreEnqueue, name)
		disable(&profile.Plugins.Reserve, name)
		disable(&profile.Plugins.PreBind, name)
	}
	lister := &swappableLister{Snapshot: snapshot}
	registry := plugins.NewInTreeRegistry()
	build := func(p *config.KubeSchedulerProfile) (framework.Framework, error) {
		return frameworkruntime.NewFramework(ctx, registry, p,
			frameworkruntime.WithSnapshotSharedLister(lister),
			frameworkruntime.WithInformerFactory(opts.Informers),
			frameworkruntime.WithClientSet(opts.Client),
			frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		)
	}
	fw, err := build(profile)
	if err != nil {
		return nil, fmt.Errorf("building the simulation framework: %w", err)
	}
	s := &Simulator{fw: fw, snapshot: lister, opts: opts}
	if !opts.FromScratch {
		lightProfile := profile.DeepCopy()
		for _, name := range incrementalPlugins {
			disable(&lightProfile.Plugins.PreFilter, name)
		}
		if s.light, err = build(lightProfile); err != nil {
			return nil, fmt.Errorf("building the simulation framework: %w", err)
		}
		if s.spread, err = newPlugin(ctx, registry, profile, names.PodTopologySpread, s.light); err != nil {
			return nil, err
		}
		if s.affinity, err = newPlugin(ctx, registry, profile, names.InterPodAffinity, s.light); err != nil {
			return nil, err
		}
		if _, err := newIncremental(s.spread, s.affinity); err != nil {
			return nil, fmt.Errorf("incremental PreFilter state: %w", err)
		}
	}
	s.Use(snapshot)
	return s, nil
}

// newPlugin builds one of the profile's PreFilter plugins with the profile's arguments, as the framework does.
func newPlugin(ctx context.Context, registry frameworkruntime.Registry, profile *config.KubeSchedulerProfile, name string,
	handle fwk.Handle) (fwk.PreFilterPlugin, error) {
	var args runtime.Object
	for _, pc := range profile.PluginConfig {
		if pc.Name == name {
			args = pc.Args
		}
	}
	p, err := registry[name](ctx, args, handle)
	if err != nil {
		return nil, fmt.Errorf("building plugin %s: %w", name, err)
	}
	pre, ok := p.(fwk.PreFilterPlugin)
	if !ok || pre.PreFilterExtensions() == nil {
		return nil, fmt.Errorf("plugin %s has no PreFilter extensions", name)
	}
	return pre, nil
}

func disable(set *config.PluginSet, name string) {
	set.Disabled = append(set.Disabled, config.Plugin{Name: name})
	kept := set.Enabled[:0]
	for _, p := range set.Enabled {
		if p.Name != name {
			kept = append(kept, p)
		}
	}
	set.Enabled = kept
}

// swappableLister lets one framework serve successive snapshots.
type swappableLister struct {
	*Snapshot
}

// Use points the simulator at another snapshot. The snapshot keeps the incremental PreFilter state it was given
// the first time, as long as no other simulator uses it.
func (s *Simulator) Use(snapshot *Snapshot) {
	s.snapshot.Snapshot = snapshot
	if s.light == nil {
		return
	}
	if inc, ok := snapshot.observer.(*incremental); ok && inc.spread == s.spread {
		return
	}
	inc, _ := newIncremental(s.spread, s.affinity) // the shape was checked in New
	withAnti, _ := snapshot.HavePodsWithRequiredAntiAffinityList()
	for _, ni := range withAnti {
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			inc.countAntiKeys(pi, 1)
		}
	}
	snapshot.observer = inc
}

// IncrementalStats are, for the snapshot in use, the class states the incremental cache computed from scratch and
// those it forgot because a change could not be applied to them.
func (s *Simulator) IncrementalStats() (computed, dropped int) {
	if inc, ok := s.snapshot.observer.(*incremental); ok {
		return inc.computed, inc.drops
	}
	return 0, 0
}

// Snapshot returns the snapshot in use.
func (s *Simulator) Snapshot() *Snapshot { return s.snapshot.Snapshot }

// PreFilter runs the PreFilter plugins for a pod against the current snapshot and returns the cycle state the
// Filter plugins need. A non-success status means the pod fits no node of the snapshot at all.
//
// The state of PodTopologySpread and InterPodAffinity comes from the snapshot's incremental cache: it is valid
// until the snapshot next changes. While the snapshot is suspended (a trial), it is a copy of the cache's with the
// changes tried since applied.
func (s *Simulator) PreFilter(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.PreFilterResult, *fwk.Status) {
	s.PreFilters++
	snap := s.snapshot.Snapshot
	inc, ok := snap.observer.(*incremental)
	if !ok || s.light == nil || (snap.Suspended() && !snap.triedAll) {
		return s.fromScratch(ctx, pod)
	}
	var c *classState
	if snap.Suspended() {
		c = inc.tried(ctx, pod, snap.tried)
	} else {
		nodes, _ := snap.List()
		c, _ = inc.class(ctx, pod, nodes)
	}
	if c == nil {
		return s.fromScratch(ctx, pod)
	}
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(false)
	res, status, _ := s.light.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		return state, res, status
	}
	c.lend(state, snap.gen)
	if s.opts.CheckIncremental {
		s.check(ctx, pod, state)
	}
	return state, res, status
}

func (s *Simulator) fromScratch(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.PreFilterResult, *fwk.Status) {
	s.FullPreFilters++
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(false)
	res, status, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	return state, res, status
}

// check compares a lent state with a fresh one on every node.
func (s *Simulator) check(ctx context.Context, pod *v1.Pod, lent fwk.CycleState) {
	fresh, _, status := s.fromScratch(ctx, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		s.Mismatches = append(s.Mismatches, fmt.Sprintf("pod %s/%s: PreFilter from scratch fails (%s), the incremental state does not",
			pod.Namespace, pod.Name, status.Message()))
		return
	}
	nodes, _ := s.snapshot.List()
	for _, ni := range nodes {
		a, b := s.light.RunFilterPlugins(ctx, lent, pod, ni), s.fw.RunFilterPlugins(ctx, fresh, pod, ni)
		if a.Code() != b.Code() || a.Message() != b.Message() {
			var on []string
			for _, pi := range ni.GetPods() {
				on = append(on, pi.GetPod().Name+fmt.Sprint(pi.GetPod().Labels))
			}
			s.Mismatches = append(s.Mismatches, fmt.Sprintf("pod %s/%s on node %s: incremental %q (%s), from scratch %q (%s) DEBUG %v",
				pod.Namespace, pod.Name, ni.Node().Name, a.Message(), a.Code(), b.Message(), b.Code(), on))
		}
	}
}

// Filter runs the Filter plugins for a pod on one node of the snapshot, with the state PreFilter returned.
func (s *Simulator) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s.Filters++
	ni := s.snapshot.NodeInfo(nodeName)
	if ni == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node "+nodeName+" is not in the simulation")
	}
	if g, err := state.Read(generationKey); err == nil {
		if uint64(g.(generation)) != s.snapshot.gen {
			// lent before the snapshot changed: its counts have moved on
			s.Stale++
			var status *fwk.Status
			if state, _, status = s.fromScratch(ctx, pod); !status.IsSuccess() && !status.IsSkip() {
				return status
			}
		}
		return s.light.RunFilterPlugins(ctx, state, pod, ni)
	}
	return s.fw.RunFilterPlugins(ctx, state, pod, ni)
}

// Fits runs PreFilter and Filter for a pod on one node; a nil error means the scheduler would place it there.
func (s *Simulator) Fits(ctx context.Context, pod *v1.Pod, nodeName string) error {
	state, res, status := s.PreFilter(ctx, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		return status.AsError()
	}
	if !res.AllNodes() && !res.NodeNames.Has(nodeName) {
		return fmt.Errorf("PreFilter excludes node %s", nodeName)
	}
	if st := s.Filter(ctx, state, pod, nodeName); !st.IsSuccess() {
		return st.AsError()
	}
	return nil
}
