/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package operator builds Stevedore's controllers and wires them together: the provisioner and the NodeClaim
// lifecycle the scheduler plugin adapts, disruption, interruption, NodePool and EC2NodeClass status, and the
// cloud provider they share. It is the one place that knows every component; the scheduler plugin only adapts
// framework calls to the provisioner it returns.
package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/buffer"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	overlaystatus "github.com/stevedore-dev/stevedore/pkg/cloud/overlay/status"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/interruption"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/report"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/staticpool"
)

// Options configure the controllers (the plugin's arguments, defaulted and validated).
type Options struct {
	ClusterName, ClusterEndpoint, Region, InterruptionQueue string
	BatchIdle, BatchMax, SolveTimeout                       time.Duration
	// RegistrationTimeout bounds a launch: a node that has not registered by then is deleted. It also bounds how
	// long disruption waits for replacements to initialize and how long a scheduled-change notice waits for its
	// replacements: each waits for a launch to complete.
	RegistrationTimeout     time.Duration
	MaxInstanceTypes        int
	EmbeddedCatalog         bool
	VMMemoryOverheadPercent float64
	MinValuesBestEffort     bool
	// RebalanceAction is one of RebalanceActions.
	RebalanceAction                                   string
	SpotInterruptionNotice                            time.Duration
	DisableDisruption, SpotToSpotConsolidation        bool
	DisruptionPollInterval, DisruptionValidationDelay time.Duration
	GarbageCollectionInterval                         time.Duration
	// Repair turns node auto-repair on (nil: off).
	Repair *disruption.RepairOptions
	// PodDeletionCost steers scale-in to the nodes consolidation removes first.
	PodDeletionCost bool
	// Env reads the process environment (AWS settings); nil means os.Getenv.
	Env func(string) string
}

// DefaultOptions returns the defaults of every Options field that has one; the controllers' own defaults are the
// source, so each default is stated once.
func DefaultOptions() Options {
	return Options{
		BatchIdle:                 time.Second,
		BatchMax:                  10 * time.Second,
		SolveTimeout:              2 * time.Second,
		RegistrationTimeout:       15 * time.Minute,
		MaxInstanceTypes:          60,
		VMMemoryOverheadPercent:   7.5,
		RebalanceAction:           interruption.RebalanceReplace,
		SpotInterruptionNotice:    interruption.DefaultSpotNotice,
		DisruptionPollInterval:    disruption.DefaultPollInterval,
		DisruptionValidationDelay: disruption.DefaultValidationDelay,
		GarbageCollectionInterval: disruption.DefaultGCInterval,
	}
}

// RebalanceActions are the values RebalanceAction accepts.
func RebalanceActions() []string {
	return []string{interruption.RebalanceReplace, interruption.RebalanceEvent}
}

// Host is what the process hosting the controllers gives them: its API access, its informer factory (started by
// the host; the controllers register their informers on it before that), its event recorder and scheduler name,
// and its leadership.
type Host struct {
	KubeConfig    *rest.Config
	ClientSet     kubernetes.Interface
	Informers     informers.SharedInformerFactory
	Recorder      events.EventRecorder
	SchedulerName string
	Leadership    *state.Leadership
	// OnInitialized is called with a node's name once it finished initializing.
	OnInitialized func(node string)
	// Queue is the scheduler's scheduling queue (the framework Handle): pods the provisioner held back are put
	// back in it when what held them clears.
	Queue provision.SchedulingQueue
}

// Controllers are Stevedore's controllers, built and wired.
type Controllers struct {
	Provisioner *provision.Provisioner
	Lifecycle   *provision.Lifecycle
	Disruption  *disruption.Controller
}

// New builds the controllers and registers the informers they need; they start once the host's leadership is won
// (the informers of the host's factory must be started by the host).
func New(ctx context.Context, host Host, opts Options) (*Controllers, error) {
	logger := klog.FromContext(ctx)
	kube, err := client.NewKube(host.KubeConfig)
	if err != nil {
		return nil, err
	}
	stevedore, err := client.NewStevedore(host.KubeConfig)
	if err != nil {
		return nil, err
	}
	kf := host.Informers
	nodes, pods, daemonSets := kf.Core().V1().Nodes(), kf.Core().V1().Pods(), kf.Apps().V1().DaemonSets()
	pdbs := kf.Policy().V1().PodDisruptionBudgets()
	// registered now, started with the host's informers
	nodes.Informer()
	pods.Informer()
	daemonSets.Informer()
	pdbs.Informer()
	sf := externalversions.NewSharedInformerFactory(stevedore, 0)
	claims, pools, classes := sf.Stevedore().V1().NodeClaims(), sf.Stevedore().V1().NodePools(), sf.Stevedore().V1().EC2NodeClasses()
	buffers := sf.Stevedore().V1().CapacityBuffers()
	overlays := sf.Stevedore().V1().NodeOverlays()
	overlays.Informer()
	claims.Informer()
	pools.Informer()
	classes.Informer()
	// every controller reads NodePools in their canonical form
	nodePools := state.NormalizedNodePools(pools.Lister())

	// what new nodes need to join: from EKS, never guessed; clusterEndpoint overrides the endpoint EKS gives
	cluster, err := awscloud.DescribeCluster(ctx, opts.Region, opts.ClusterName, opts.Env)
	if err != nil {
		return nil, fmt.Errorf("the nodes Stevedore launches need the cluster's endpoint, certificate authority and "+
			"Service range, which it reads from EKS: allow eks:DescribeCluster on cluster %q to the controller's role "+
			"(deploy/iam) and check clusterName and region: %w", opts.ClusterName, err)
	}
	endpoint := cluster.Endpoint
	if opts.ClusterEndpoint != "" {
		endpoint = opts.ClusterEndpoint
	}
	klog.FromContext(ctx).Info("Cluster described by EKS", "cluster", opts.ClusterName, "endpoint", endpoint,
		"serviceCIDR", cluster.ServiceCIDR, "ipFamily", cluster.IPFamily)
	provider, err := awscloud.New(ctx, awscloud.Options{
		ClusterName: opts.ClusterName, ClusterEndpoint: endpoint, CABundle: cluster.CABundle, ServiceCIDR: cluster.ServiceCIDR,
		Region: opts.Region, KubernetesVersion: kubernetesVersion(host.ClientSet), Env: opts.Env, NodeClasses: classes.Lister(),
		MaxInstanceTypes: opts.MaxInstanceTypes, VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent, UseFallback: opts.EmbeddedCatalog,
	})
	if err != nil {
		return nil, fmt.Errorf("AWS provider: %w", err)
	}
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{Informers: kf, Client: kube})
	if err != nil {
		return nil, err
	}
	// every decision prices and sizes instance types with the NodeOverlays in force
	overlaid := overlay.NewProvider(provider, overlays.Lister())
	c := &Controllers{}
	c.Provisioner = provision.New(provision.Options{
		ClusterName: opts.ClusterName, Region: opts.Region, SchedulerName: host.SchedulerName,
		BatchIdle: opts.BatchIdle, BatchMax: opts.BatchMax, SolveTimeout: opts.SolveTimeout, MinValuesBestEffort: opts.MinValuesBestEffort,
		Kube: kube, Stevedore: stevedore, Nodes: nodes.Lister(), Pods: pods.Lister(), DaemonSets: daemonSets.Lister(),
		NodeClaims: claims.Lister(), NodePools: nodePools, Cloud: overlaid, Simulator: sim, Recorder: host.Recorder,
		Queue: host.Queue,
		NodeClassHash: func(_ context.Context, ref *stevedorev1.NodeClassReference) string {
			if nc, err := classes.Lister().Get(ref.Name); err == nil {
				return awscloud.NodeClassHash(nc)
			}
			return ""
		},
	})
	c.Lifecycle = provision.NewLifecycle(c.Provisioner, provision.LifecycleOptions{
		RegistrationTimeout: opts.RegistrationTimeout, OnInitialized: host.OnInitialized,
	})
	if err := c.Lifecycle.Register(ctx, claims.Informer(), nodes.Informer(), pods.Informer()); err != nil {
		return nil, err
	}
	if _, err := pools.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.Provisioner.NodePoolsChanged(ctx) },
		// a spec change only: the status, rewritten every few seconds, changes nothing a pod could use
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*stevedorev1.NodePool)
			n, okNew := newObj.(*stevedorev1.NodePool)
			if !okOld || !okNew || o.Generation != n.Generation {
				c.Provisioner.NodePoolsChanged(ctx)
			}
		},
	}); err != nil {
		return nil, err
	}
	disruptionSim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{Informers: kf, Client: kube})
	if err != nil {
		return nil, err
	}
	c.Disruption = disruption.New(disruption.Options{
		Kube: kube, Stevedore: stevedore, Nodes: nodes.Lister(), Pods: pods.Lister(), PDBs: pdbs.Lister(),
		NodeClaims: claims.Lister(), NodePools: nodePools, Provisioner: c.Provisioner, Cloud: overlaid, Simulator: disruptionSim,
		Recorder: host.Recorder, PollInterval: opts.DisruptionPollInterval,
		ValidationDelay: opts.DisruptionValidationDelay, ReplacementTimeout: opts.RegistrationTimeout,
		SpotToSpot: opts.SpotToSpotConsolidation, Voluntary: !opts.DisableDisruption, GCInterval: opts.GarbageCollectionInterval,
		Repair: opts.Repair,
		OverlaidTypes: func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool) {
			list, err := overlays.Lister().List(labels.Everything())
			if err != nil || overlay.NewSet(list).Empty() {
				return nil, false
			}
			its, err := c.Provisioner.InstanceTypes(ctx, np)
			return its, err == nil
		},
	})
	overlayStatus := overlaystatus.NewController(stevedore, overlays, func(ctx context.Context) {
		c.Provisioner.OfferingsChanged()
		c.Provisioner.NodePoolsChanged(ctx)
	})
	if err := c.Disruption.Register(pods.Informer()); err != nil {
		return nil, err
	}
	// the interruption controller acts on the queue's notices, when a queue is configured, and on Capacity Blocks
	// about to end
	interrupts := interruption.New(interruption.Options{
		Queue: provider.SQS(), QueueURL: opts.InterruptionQueue, NodeClaims: claims.Lister(), Interrupter: c.Disruption,
		Offerings: offeringsMarker{provider: provider, prov: c.Provisioner}, Recorder: host.Recorder, Rebalance: opts.RebalanceAction,
		SpotNotice: opts.SpotInterruptionNotice, ScheduledChangeWait: opts.RegistrationTimeout, Reservations: provider,
	})
	if opts.InterruptionQueue == "" {
		logger.Info("No interruption queue configured: spot interruptions and maintenance events are not handled")
	}
	reporter := report.New(report.Options{Stevedore: stevedore, NodePools: nodePools, NodeClaims: claims.Lister(), NodeClasses: classes.Lister(),
		Nodes: nodes.Lister(), Pods: pods.Lister(), SchedulerName: host.SchedulerName, UnavailableOfferings: provider.UnavailableOfferings().Len})
	if err := reporter.RegisterPodStartup(pods.Informer()); err != nil {
		return nil, err
	}
	bufferSim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{Informers: kf, Client: kube})
	if err != nil {
		return nil, err
	}
	warm := buffer.New(buffer.Options{Kube: kube, Stevedore: stevedore, Buffers: buffers.Lister(), Provisioner: c.Provisioner,
		Simulator: bufferSim, Recorder: host.Recorder})
	costs := deletioncost.New(deletioncost.Options{Kube: kube, Pods: pods.Lister(), Nodes: nodes.Lister(), NodeClaims: claims.Lister(),
		NodePools: nodePools})
	static := staticpool.New(staticpool.Options{Stevedore: stevedore, NodePools: nodePools, Pods: pods.Lister(),
		Provisioner: c.Provisioner, Recorder: host.Recorder})
	sf.Start(ctx.Done())
	status := awscloud.NewNodeClassStatus(provider, stevedore, classes, claims, host.Recorder)
	go func() {
		select {
		case <-host.Leadership.Elected():
		case <-ctx.Done():
			return
		}
		if !cache.WaitForCacheSync(ctx.Done(), claims.Informer().HasSynced, pools.Informer().HasSynced, classes.Informer().HasSynced,
			nodes.Informer().HasSynced, pods.Informer().HasSynced, daemonSets.Informer().HasSynced, pdbs.Informer().HasSynced,
			buffers.Informer().HasSynced, overlays.Informer().HasSynced) {
			return
		}
		logger.Info("Stevedore controllers starting", "clusterName", opts.ClusterName, "region", opts.Region)
		go c.Provisioner.Run(ctx)
		go c.Provisioner.WatchPending(ctx, 3*time.Second)
		go c.Lifecycle.Run(ctx)
		go status.Run(ctx)
		go overlayStatus.Run(ctx)
		go c.Disruption.Run(ctx)
		go static.Run(ctx)
		go warm.Run(ctx)
		if opts.PodDeletionCost {
			go costs.Run(ctx)
		}
		go reporter.Run(ctx)
		if opts.InterruptionQueue != "" {
			go interrupts.Run(ctx)
		}
		go interrupts.RunCapacityBlocks(ctx)
	}()
	return c, nil
}

// kubernetesVersion is the API server's major.minor ("1.37"), or the version the binary was built with.
func kubernetesVersion(cs kubernetes.Interface) string {
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		minor := strings.TrimRight(v.Minor, "+")
		if v.Major != "" && v.Major != "0" && minor != "" {
			return v.Major + "." + minor
		}
	}
	return version.DefaultKubeBinaryVersion
}

// offeringsMarker marks an offering unavailable in the provider's cache and has the provisioner forget the
// instance types it cached, so that replacements are planned elsewhere at once.
type offeringsMarker struct {
	provider *awscloud.Provider
	prov     *provision.Provisioner
}

func (m offeringsMarker) MarkUnavailable(instanceType, zone, capacityType, reason string) {
	m.provider.MarkUnavailable(instanceType, zone, capacityType, reason)
	m.prov.OfferingsChanged()
}
