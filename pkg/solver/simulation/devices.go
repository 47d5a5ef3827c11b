/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// DeviceFitter decides whether a pod's ResourceClaims can be allocated from the devices of one node, with
// kube-scheduler's DynamicResources plugin as the default profile configures it (PreFilter, Filter, then Reserve to
// read the allocation it chose). The devices are given as ResourceSlices: the model of a node not yet launched, or
// a node's published slices. A DeviceFitter serves one caller at a time.
type DeviceFitter struct {
	fw  framework.Framework
	dra *draObjects
}

// DeviceObjects are the cluster's DRA objects a fit reads: the pods' claims (a claim from a template is found through
// the pod's status.resourceClaimStatuses, as kube-scheduler finds it) and the DeviceClasses their requests name.
type DeviceObjects struct {
	Claims  []*resourceapi.ResourceClaim
	Classes []*resourceapi.DeviceClass
}

// DeviceFit is the allocation the plugin chose for a pod on a node: the devices of each driver its claims take.
type DeviceFit struct {
	Devices map[string][]string
}

// Count returns how many devices of driver the allocation takes.
func (f DeviceFit) Count(driver string) int { return len(f.Devices[driver]) }

// NewDeviceFitter builds the plugin over an empty cluster.
func NewDeviceFitter(ctx context.Context) (*DeviceFitter, error) {
	metrics.Register() // idempotent
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := cfg.Profiles[0].DeepCopy()
	profile.SchedulerName = "stevedore-device-fit"
	only := func(set *config.PluginSet) {
		set.Enabled = slices.DeleteFunc(set.Enabled, func(p config.Plugin) bool { return p.Name != names.DynamicResources })
	}
	for _, set := range []*config.PluginSet{&profile.Plugins.MultiPoint, &profile.Plugins.PreEnqueue, &profile.Plugins.QueueSort,
		&profile.Plugins.PreFilter, &profile.Plugins.Filter, &profile.Plugins.PostFilter, &profile.Plugins.PreScore,
		&profile.Plugins.Score, &profile.Plugins.Reserve, &profile.Plugins.Permit, &profile.Plugins.PreBind,
		&profile.Plugins.Bind, &profile.Plugins.PostBind} {
		only(set)
	}
	// the framework requires a queue sort and a binder; neither runs here
	profile.Plugins.QueueSort.Enabled = []config.Plugin{{Name: names.PrioritySort}}
	profile.Plugins.Bind.Enabled = []config.Plugin{{Name: names.DefaultBinder}}
	client := fake.NewClientset()
	dra := &draObjects{}
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithSnapshotSharedLister(NewSnapshot()),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithSharedDRAManager(dra),
	)
	if err != nil {
		return nil, fmt.Errorf("building the device fit framework: %w", err)
	}
	return &DeviceFitter{fw: fw, dra: dra}, nil
}

// Fit allocates the pod's claims on node from the slices, as kube-scheduler would; it returns the devices taken, or
// an error saying why the claims cannot be allocated there (the plugin's own reason).
func (f *DeviceFitter) Fit(ctx context.Context, pod *v1.Pod, node *v1.Node, nodeSlices []*resourceapi.ResourceSlice, objects DeviceObjects) (DeviceFit, error) {
	f.dra.reset(objects, nodeSlices)
	defer f.dra.reset(DeviceObjects{}, nil)
	state := framework.NewCycleState()
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	if _, st, _ := f.fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		if st.IsSkip() {
			return DeviceFit{}, nil
		}
		return DeviceFit{}, st.AsError()
	}
	if st := f.fw.RunFilterPlugins(ctx, state, pod, ni); !st.IsSuccess() {
		return DeviceFit{}, st.AsError()
	}
	if st := f.fw.RunReservePluginsReserve(ctx, state, pod, node.Name); !st.IsSuccess() {
		return DeviceFit{}, st.AsError()
	}
	fit := DeviceFit{Devices: map[string][]string{}}
	for _, uid := range slices.Sorted(maps.Keys(f.dra.pending)) {
		alloc := f.dra.pending[uid].Status.Allocation
		if alloc == nil {
			continue
		}
		for _, r := range alloc.Devices.Results {
			fit.Devices[r.Driver] = append(fit.Devices[r.Driver], r.Pool+"/"+r.Device)
		}
	}
	f.fw.RunReservePluginsUnreserve(ctx, state, pod, node.Name)
	return fit, nil
}

// draObjects is the SharedDRAManager of a fit: the given claims, classes and slices, and the allocations the plugin
// reserves during it.
type draObjects struct {
	claims  []*resourceapi.ResourceClaim
	classes []*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	pending map[types.UID]*resourceapi.ResourceClaim
}

var (
	_ fwk.SharedDRAManager     = &draObjects{}
	_ fwk.ResourceClaimTracker = &draClaims{}
)

func (d *draObjects) reset(objects DeviceObjects, nodeSlices []*resourceapi.ResourceSlice) {
	d.claims, d.classes, d.slices = objects.Claims, objects.Classes, nodeSlices
	d.pending = map[types.UID]*resourceapi.ResourceClaim{}
}

func (d *draObjects) ResourceClaims() fwk.ResourceClaimTracker { return &draClaims{d} }
func (d *draObjects) ResourceSlices() fwk.ResourceSliceLister  { return d }
func (d *draObjects) DeviceClasses() fwk.DeviceClassLister     { return d }
func (d *draObjects) DeviceClassResolver() fwk.DeviceClassResolver {
	return d
}

func (d *draObjects) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return d.slices, nil
}

func (d *draObjects) List() ([]*resourceapi.DeviceClass, error) { return d.classes, nil }

func (d *draObjects) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range d.classes {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// GetDeviceClass returns the class that serves an extended resource: the one naming it in spec.extendedResourceName
// (the oldest first, then by name, as kube-scheduler picks), or the class of the implicit
// deviceclass.resource.kubernetes.io/<class> name.
func (d *draObjects) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	var found *resourceapi.DeviceClass
	for _, c := range d.classes {
		if c.Spec.ExtendedResourceName == nil || *c.Spec.ExtendedResourceName != string(name) {
			continue
		}
		if found == nil || c.CreationTimestamp.Before(&found.CreationTimestamp) ||
			(c.CreationTimestamp.Equal(&found.CreationTimestamp) && c.Name < found.Name) {
			found = c
		}
	}
	if found != nil {
		return found
	}
	const implicit = "deviceclass.resource.kubernetes.io/"
	if s := string(name); len(s) > len(implicit) && s[:len(implicit)] == implicit {
		c, _ := d.Get(s[len(implicit):])
		return c
	}
	return nil
}

// draClaims is the claim tracker of a fit.
type draClaims struct{ d *draObjects }

func (c *draClaims) List() ([]*resourceapi.ResourceClaim, error) { return c.d.claims, nil }

func (c *draClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	for _, claim := range c.d.claims {
		if claim.Namespace == namespace && claim.Name == name {
			return claim, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// ListAllAllocatedDevices are the devices of the claims already allocated and of the allocations reserved in the fit.
func (c *draClaims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	out := sets.New[structured.DeviceID]()
	add := func(a *resourceapi.AllocationResult) {
		if a == nil {
			return
		}
		for _, r := range a.Devices.Results {
			out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	for _, claim := range c.d.claims {
		add(claim.Status.Allocation)
	}
	for _, claim := range c.d.pending {
		add(claim.Status.Allocation)
	}
	return out, nil
}

func (c *draClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	devices, err := c.ListAllAllocatedDevices()
	if err != nil {
		return nil, err
	}
	return &structured.AllocatedState{AllocatedDevices: devices, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}, nil
}

func (c *draClaims) SignalClaimPendingAllocation(uid types.UID, claim *resourceapi.ResourceClaim) error {
	c.d.pending[uid] = claim
	return nil
}

func (c *draClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	if claim, ok := c.d.pending[uid]; ok {
		return claim.Status.Allocation
	}
	return nil
}

func (c *draClaims) MaybeRemoveClaimPendingAllocation(uid types.UID, _ bool) bool {
	_, ok := c.d.pending[uid]
	delete(c.d.pending, uid)
	return ok
}

// AssumeClaimAfterAPICall and AssumedClaimRestore belong to PreBind, which a fit never runs.
func (c *draClaims) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return nil }
func (c *draClaims) AssumedClaimRestore(string, string)                       {}
