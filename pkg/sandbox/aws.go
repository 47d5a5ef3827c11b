/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/devices"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

// startAWS starts the emulator seeded from the catalog, creates the interruption queue and registers a Node for
// every instance that starts running, as its kubelet would, LaunchDelay after launch.
func (s *Sandbox) startAWS(ctx context.Context) error {
	cat := s.opts.Catalog
	if cat == nil {
		var err error
		if cat, err = catalog.ForRegion(s.opts.Region); err != nil {
			return err
		}
	}
	emu, err := awsemu.Start(awsemu.Options{ClusterName: s.opts.ClusterName, Catalog: cat})
	if err != nil {
		return err
	}
	s.AWS = emu
	// the cluster new nodes join: this API server, its Service range (apiserver.go)
	emu.SetCluster(awsemu.Cluster{Endpoint: s.RESTConfig.Host, CA: s.RESTConfig.CAData, ServiceIPv4CIDR: serviceCIDR,
		IPFamily: "ipv4", Version: "1.37"})
	s.InterruptionQueueURL = emu.SQS.CreateQueue(s.opts.ClusterName + "-interruptions")
	s.nodes = &nodeRegistrar{kube: s.Kube, delay: s.opts.LaunchDelay, region: emu.Region(), catalog: indexByName(cat),
		ctx: ctx, timers: map[string]*time.Timer{}}
	emu.SetHooks(awsemu.InstanceHooks{Running: s.nodes.instanceRunning, Terminated: s.nodes.instanceTerminated,
		Rebooted: s.nodes.instanceRebooted})
	return nil
}

func indexByName(c *catalog.File) map[string]catalog.InstanceType {
	out := map[string]catalog.InstanceType{}
	for _, it := range c.InstanceTypes {
		out[it.Name] = it
	}
	return out
}

// nodeRegistrar plays the kubelets and the cloud node controller: Nodes appear when instances have booted and go
// when instances terminate.
type nodeRegistrar struct {
	kube    kubernetes.Interface
	delay   time.Duration
	region  string
	catalog map[string]catalog.InstanceType
	ctx     context.Context

	mu       sync.Mutex
	timers   map[string]*time.Timer
	stopped  bool
	withhold func(*awsemu.Instance) bool
}

// SetNodeRegistration makes instances for which withhold returns true never register a Node (a broken AMI or
// bootstrap); nil restores normal registration.
func (s *Sandbox) SetNodeRegistration(withhold func(*awsemu.Instance) bool) {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	s.nodes.withhold = withhold
}

func (r *nodeRegistrar) instanceRunning(inst *awsemu.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || (r.withhold != nil && r.withhold(inst)) {
		return
	}
	r.timers[inst.ID] = time.AfterFunc(r.delay, func() { r.register(inst) })
}

func (r *nodeRegistrar) register(inst *awsemu.Instance) {
	r.mu.Lock()
	delete(r.timers, inst.ID)
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		return
	}
	logger := klog.FromContext(r.ctx).WithValues("instance", inst.ID)
	it, ok := r.catalog[inst.Type]
	if !ok {
		logger.Error(nil, "Emulated instance has a type the catalog lacks; no node registers", "type", inst.Type)
		return
	}
	node, err := nodeForInstance(inst, it, r.region)
	if err != nil {
		logger.Error(err, "Emulated kubelet cannot start; no node registers")
		return
	}
	r.withoutDRAServedResources(node)
	created, err := r.kube.CoreV1().Nodes().Create(r.ctx, node, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.IsAlreadyExists(err) {
			logger.Error(err, "Registering the emulated node failed", "node", node.Name)
		}
		return
	}
	r.publishDevices(created, inst, it)
}

// withoutDRAServedResources takes out of the node's capacity the extended resources a DeviceClass serves through DRA
// (spec.extendedResourceName): a cluster that serves nvidia.com/gpu so runs NVIDIA's DRA driver, not its device
// plugin, and kube-scheduler allocates those requests from the node's devices.
func (r *nodeRegistrar) withoutDRAServedResources(node *corev1.Node) {
	classes, err := r.kube.ResourceV1().DeviceClasses().List(r.ctx, metav1.ListOptions{})
	if err != nil {
		klog.FromContext(r.ctx).Error(err, "Listing DeviceClasses failed; the node advertises every device", "node", node.Name)
		return
	}
	for _, c := range classes.Items {
		if name := c.Spec.ExtendedResourceName; name != nil {
			delete(node.Status.Capacity, corev1.ResourceName(*name))
			delete(node.Status.Allocatable, corev1.ResourceName(*name))
		}
	}
}

// publishDevices publishes the ResourceSlices the DRA drivers of the node's devices would (NVIDIA's for its GPUs,
// Neuron's for its Neuron devices, DRANET's for the EFA interfaces attached at launch), owned by the node as a
// driver's are, so that they go with it.
func (r *nodeRegistrar) publishDevices(node *corev1.Node, inst *awsemu.Instance, it catalog.InstanceType) {
	labels := cloud.AcceleratorLabels(it)
	labels[corev1.LabelInstanceTypeStable] = it.Name
	for _, slice := range devices.Slices(node.Name, labels, efaInterfaces(inst)) {
		slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}}
		if _, err := r.kube.ResourceV1().ResourceSlices().Create(r.ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			klog.FromContext(r.ctx).Error(err, "Publishing the emulated node's devices failed", "node", node.Name, "driver", slice.Spec.Driver)
		}
	}
}

func (r *nodeRegistrar) instanceTerminated(inst *awsemu.Instance) {
	r.mu.Lock()
	if t, ok := r.timers[inst.ID]; ok {
		t.Stop()
		delete(r.timers, inst.ID)
	}
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		return
	}
	// The cloud node controller deletes the Node of an instance that no longer exists.
	node, err := r.kube.CoreV1().Nodes().Get(r.ctx, inst.PrivateDNSName, metav1.GetOptions{})
	if err != nil || node.Spec.ProviderID != inst.ProviderID() {
		return
	}
	if err := r.kube.CoreV1().Nodes().Delete(r.ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(r.ctx).Error(err, "Deleting the node of a terminated instance failed", "node", node.Name)
	}
}

func (r *nodeRegistrar) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for _, t := range r.timers {
		t.Stop()
	}
}

var _ = corev1.NodeReady
