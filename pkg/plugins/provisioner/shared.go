package provisioner

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/client"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/interruption"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/report"
)

// Shared is what every plugin instance of one process shares: one provisioner, one NodeClaim lifecycle, one
// cloud provider. It is built with the first plugin instance, while the scheduler sets up (before its informers
// start), so every informer it needs is registered in time.
type Shared struct {
	opts Options

	once sync.Once
	err  error

	prov       *provision.Provisioner
	lifecycle  *provision.Lifecycle
	disruption *disruption.Controller

	mu      sync.Mutex
	waiting map[types.UID]waitingPod
}

type waitingPod struct {
	node   string
	handle fwk.Handle
	since  time.Time
}

func (s *Shared) init(ctx context.Context, h fwk.Handle, args Args) error {
	s.once.Do(func() { s.err = s.build(ctx, h, args) })
	return s.err
}

func (s *Shared) build(ctx context.Context, h fwk.Handle, args Args) error {
	logger := klog.FromContext(ctx)
	kube, err := client.NewKube(h.KubeConfig())
	if err != nil {
		return err
	}
	stevedore, err := client.NewStevedore(h.KubeConfig())
	if err != nil {
		return err
	}
	kf := h.SharedInformerFactory()
	nodes, pods, daemonSets := kf.Core().V1().Nodes(), kf.Core().V1().Pods(), kf.Apps().V1().DaemonSets()
	pdbs := kf.Policy().V1().PodDisruptionBudgets()
	// registered now, started with the scheduler's informers
	nodes.Informer()
	pods.Informer()
	daemonSets.Informer()
	pdbs.Informer()
	sf := externalversions.NewSharedInformerFactory(stevedore, 0)
	claims, pools, classes := sf.Stevedore().V1().NodeClaims(), sf.Stevedore().V1().NodePools(), sf.Stevedore().V1().EC2NodeClasses()
	claims.Informer()
	pools.Informer()
	classes.Informer()

	endpoint := args.ClusterEndpoint
	if endpoint == "" {
		endpoint = h.KubeConfig().Host
	}
	ca := h.KubeConfig().CAData
	if len(ca) == 0 && h.KubeConfig().CAFile != "" {
		if ca, err = os.ReadFile(h.KubeConfig().CAFile); err != nil {
			return fmt.Errorf("reading the cluster CA: %w", err)
		}
	}
	provider, err := awscloud.New(ctx, awscloud.Options{
		ClusterName: args.ClusterName, ClusterEndpoint: endpoint, CABundle: ca, ServiceCIDR: serviceCIDR(ctx, h),
		Region: args.Region, KubernetesVersion: kubernetesVersion(h), Env: s.opts.Env, NodeClasses: classes.Lister(),
		MaxInstanceTypes: args.MaxInstanceTypes, VMMemoryOverheadPercent: *args.VMMemoryOverheadPercent,
	})
	if err != nil {
		return fmt.Errorf("AWS provider: %w", err)
	}
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{Informers: kf, Client: kube})
	if err != nil {
		return err
	}
	s.prov = provision.New(provision.Options{
		ClusterName: args.ClusterName, Region: args.Region, SchedulerName: h.ProfileName(),
		BatchIdle: args.BatchIdleDuration.Duration, BatchMax: args.BatchMaxDuration.Duration, SolveTimeout: args.SolveTimeout.Duration,
		MinValuesBestEffort: args.MinValuesPolicy == MinValuesBestEffort,
		Kube:                kube, Stevedore: stevedore, Nodes: nodes.Lister(), Pods: pods.Lister(), DaemonSets: daemonSets.Lister(),
		NodeClaims: claims.Lister(), NodePools: pools.Lister(), Cloud: provider, Simulator: sim, Recorder: h.EventRecorder(),
		NodeClassHash: func(_ context.Context, ref *stevedorev1.NodeClassReference) string {
			if nc, err := classes.Lister().Get(ref.Name); err == nil {
				return awscloud.NodeClassHash(nc)
			}
			return ""
		},
	})
	s.lifecycle = provision.NewLifecycle(s.prov, provision.LifecycleOptions{
		RegistrationTimeout: args.RegistrationTimeout.Duration, OnInitialized: s.allowWaiting,
	})
	if err := s.lifecycle.Register(claims.Informer(), nodes.Informer()); err != nil {
		return err
	}
	if _, err := pools.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.prov.NodePoolsChanged() },
		UpdateFunc: func(any, any) { s.prov.NodePoolsChanged() },
	}); err != nil {
		return err
	}
	disruptionSim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{Informers: kf, Client: kube})
	if err != nil {
		return err
	}
	s.disruption = disruption.New(disruption.Options{
		Kube: kube, Stevedore: stevedore, Nodes: nodes.Lister(), Pods: pods.Lister(), PDBs: pdbs.Lister(),
		NodeClaims: claims.Lister(), NodePools: pools.Lister(), Provisioner: s.prov, Cloud: provider, Simulator: disruptionSim,
		Recorder: h.EventRecorder(), PollInterval: args.DisruptionPollInterval.Duration,
		ValidationDelay: args.DisruptionValidationDelay.Duration, ReplacementTimeout: args.RegistrationTimeout.Duration,
		SpotToSpot: args.SpotToSpotConsolidation, Voluntary: !args.DisableDisruption, GCInterval: args.GarbageCollectionInterval.Duration,
	})
	if err := s.disruption.Register(pods.Informer()); err != nil {
		return err
	}
	var interrupts *interruption.Controller
	if args.InterruptionQueue != "" {
		interrupts = interruption.New(interruption.Options{
			Queue: provider.SQS(), QueueURL: args.InterruptionQueue, NodeClaims: claims.Lister(), Interrupter: s.disruption,
			Offerings: offeringsMarker{provider: provider, prov: s.prov}, Recorder: h.EventRecorder(), Rebalance: args.RebalanceAction,
			SpotNotice: args.SpotInterruptionNotice.Duration, ScheduledChangeWait: args.RegistrationTimeout.Duration,
		})
	} else {
		logger.Info("No interruption queue configured: spot interruptions and maintenance events are not handled")
	}
	reporter := report.New(report.Options{Stevedore: stevedore, NodePools: pools.Lister(), NodeClaims: claims.Lister(), NodeClasses: classes.Lister(),
		Nodes: nodes.Lister(), Pods: pods.Lister(), SchedulerName: h.ProfileName(), UnavailableOfferings: provider.UnavailableOfferings().Len})
	if err := reporter.RegisterPodStartup(pods.Informer()); err != nil {
		return err
	}
	sf.Start(ctx.Done())
	status := awscloud.NewNodeClassStatus(provider, stevedore, classes)
	go func() {
		select {
		case <-s.opts.Leadership.Elected():
		case <-ctx.Done():
			return
		}
		if !cache.WaitForCacheSync(ctx.Done(), claims.Informer().HasSynced, pools.Informer().HasSynced, classes.Informer().HasSynced,
			nodes.Informer().HasSynced, pods.Informer().HasSynced, daemonSets.Informer().HasSynced, pdbs.Informer().HasSynced) {
			return
		}
		logger.Info("Stevedore controllers starting", "clusterName", args.ClusterName, "region", args.Region)
		go s.prov.Run(ctx)
		go s.prov.WatchPending(ctx, 3*time.Second)
		go s.lifecycle.Run(ctx)
		go status.Run(ctx)
		go s.disruption.Run(ctx)
		go reporter.Run(ctx)
		if interrupts != nil {
			go interrupts.Run(ctx)
		}
	}()
	go s.sweepWaiting(ctx, time.Second)
	return nil
}

// allowWaiting lets pods held in Permit bind to a node that finished initializing.
func (s *Shared) allowWaiting(nodeName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, w := range s.waiting {
		if w.node != nodeName {
			continue
		}
		if wp := w.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
			delete(s.waiting, uid)
		}
	}
}

// sweepWaiting is allowWaiting's backstop: a pod whose Permit ran on a stale view of its node, or whose node
// initialized between Permit and the framework registering the pod as waiting, is allowed on the next sweep; pods
// the framework no longer holds (timed out, deleted) are dropped.
func (s *Shared) sweepWaiting(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for uid, w := range s.waiting {
			wp := w.handle.GetWaitingPod(uid)
			switch {
			case wp == nil && time.Since(w.since) > time.Minute:
				delete(s.waiting, uid)
			case wp != nil && !s.prov.IsNodeInitializing(w.node):
				wp.Allow(Name)
				delete(s.waiting, uid)
			}
		}
	}, every)
}

// kubernetesVersion is the API server's major.minor ("1.37"), or the version the binary was built with.
func kubernetesVersion(h fwk.Handle) string {
	if v, err := h.ClientSet().Discovery().ServerVersion(); err == nil {
		minor := strings.TrimRight(v.Minor, "+")
		if v.Major != "" && v.Major != "0" && minor != "" {
			return v.Major + "." + minor
		}
	}
	return version.DefaultKubeBinaryVersion
}

// serviceCIDR guesses the cluster's service CIDR (for nodeadm) from the kubernetes Service's address: EKS uses a
// /16 (10.100.0.0/16 or 172.20.0.0/16).
func serviceCIDR(ctx context.Context, h fwk.Handle) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	svc, err := h.ClientSet().CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err == nil {
		if ip := net.ParseIP(svc.Spec.ClusterIP).To4(); ip != nil {
			return fmt.Sprintf("%d.%d.0.0/16", ip[0], ip[1])
		}
	}
	return "10.100.0.0/16"
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
