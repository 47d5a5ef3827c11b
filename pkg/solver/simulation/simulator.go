package simulation

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
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
	fw       framework.Framework
	snapshot *swappableLister
	// Counts of PreFilter and Filter runs, for benchmarks.
	PreFilters, Filters int
}

// Options give the simulator what the plugins read besides nodes and pods: volumes, storage classes and CSI
// nodes come from the informer factory (started by the caller); an offline simulator gets an empty fake one.
type Options struct {
	Informers informers.SharedInformerFactory
	Client    clientset.Interface
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
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithInformerFactory(opts.Informers),
		frameworkruntime.WithClientSet(opts.Client),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
	)
	if err != nil {
		return nil, fmt.Errorf("building the simulation framework: %w", err)
	}
	return &Simulator{fw: fw, snapshot: lister}, nil
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

// Use points the simulator at another snapshot.
func (s *Simulator) Use(snapshot *Snapshot) { s.snapshot.Snapshot = snapshot }

// Snapshot returns the snapshot in use.
func (s *Simulator) Snapshot() *Snapshot { return s.snapshot.Snapshot }

// PreFilter runs the PreFilter plugins for a pod against the current snapshot and returns the cycle state the
// Filter plugins need. A non-success status means the pod fits no node of the snapshot at all.
func (s *Simulator) PreFilter(ctx context.Context, pod *v1.Pod) (fwk.CycleState, *fwk.PreFilterResult, *fwk.Status) {
	s.PreFilters++
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(false)
	res, status, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	return state, res, status
}

// Filter runs the Filter plugins for a pod on one node of the snapshot, with the state PreFilter returned.
func (s *Simulator) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s.Filters++
	ni := s.snapshot.NodeInfo(nodeName)
	if ni == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node "+nodeName+" is not in the simulation")
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
