// Package provisioner adapts Stevedore's provisioning to the kube-scheduler framework. It is thin: the plugin
// receives the pods no node fits (PostFilter), keeps the in-flight capacity accounting exact (Reserve,
// Unreserve) and holds pods bound for nodes that are still initializing (Permit); the decisions are made in
// pkg/provision.
package provisioner

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/stevedore-dev/stevedore/pkg/state"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "Provisioner"

// Reasons recorded on pods.
const (
	ReasonProvisioning = "Provisioning"
)

// Provisioner is the scheduler plugin.
type Provisioner struct {
	handle fwk.Handle
	args   Args
	shared *Shared
}

var (
	_ fwk.PostFilterPlugin  = &Provisioner{}
	_ fwk.ReservePlugin     = &Provisioner{}
	_ fwk.PermitPlugin      = &Provisioner{}
	_ fwk.EnqueueExtensions = &Provisioner{}
)

// Options are what the hosting process gives the plugin.
type Options struct {
	// Env looks up environment variables (argument defaults, AWS settings). Default os.Getenv.
	Env func(string) string
	// Leadership tells the plugin's background loops when this process leads. Default: leads at once.
	Leadership *state.Leadership
}

// Shared is the state every instance of the plugin in one process shares: each scheduler profile that enables
// Provisioner gets its own plugin instance, but there is one provisioner per process.
type Shared struct {
	opts Options
}

// NewFactory returns the plugin factory to register with the scheduler. All plugin instances it makes share one
// Shared.
func NewFactory(opts Options) frameworkruntime.PluginFactory {
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	if opts.Leadership == nil {
		opts.Leadership = state.NewLeadership()
		opts.Leadership.Lead()
	}
	shared := &Shared{opts: opts}
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := DecodeArgs(obj, opts.Env)
		if err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("Provisioner plugin configured", "clusterName", args.ClusterName,
			"region", args.Region, "batchIdleDuration", args.BatchIdleDuration.Duration,
			"batchMaxDuration", args.BatchMaxDuration.Duration, "interruptionQueue", args.InterruptionQueue)
		return &Provisioner{handle: h, args: args, shared: shared}, nil
	}
}

// Name returns the plugin's name.
func (p *Provisioner) Name() string { return Name }

// PostFilter is called for a pod that no existing node fits.
func (p *Provisioner) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	klog.FromContext(ctx).V(2).Info("No node fits pod; considering provisioning", "pod", klog.KObj(pod))
	p.handle.EventRecorder().Eventf(pod, nil, v1.EventTypeNormal, ReasonProvisioning, "Provision",
		"no existing node fits the pod; %s is considering it for a new node", Name)
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: no new node is planned for this pod yet", Name))
}

// Reserve is called when the scheduler has picked a node for the pod.
func (p *Provisioner) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve undoes Reserve.
func (p *Provisioner) Unreserve(context.Context, fwk.CycleState, *v1.Pod, string) {}

// Permit lets the pod bind.
func (p *Provisioner) Permit(context.Context, fwk.CycleState, *v1.Pod, string) (*fwk.Status, time.Duration) {
	return nil, 0
}

// EventsToRegister lists the cluster events that may let a pod this plugin held back bind: a node appearing or
// changing (its initialization finishing).
func (p *Provisioner) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}},
	}, nil
}
