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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	autoscalingv2informers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/admission"
	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/buffer"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	overlaystatus "github.com/stevedore-dev/stevedore/pkg/cloud/overlay/status"
	commitmentstatus "github.com/stevedore-dev/stevedore/pkg/commitment/status"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	gangstatus "github.com/stevedore-dev/stevedore/pkg/gang/status"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	stevedoreinformers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/apis/v1"
	autoscalinginformers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/autoscaling/v1"
	autoscalingv1beta1informers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/autoscaling/v1beta1"
	schedinformers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/scheduling/v1alpha1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalingv1beta1listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/interruption"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/lifecycle"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/termination"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/provreq"
	"github.com/stevedore-dev/stevedore/pkg/quota"
	"github.com/stevedore-dev/stevedore/pkg/report"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/staticpool"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

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
	// Env reads the process environment (AWS settings); nil means os.Getenv.
	Env func(string) string
	// Shared is the informer factory on Stevedore's and the optional APIs, and the answers to which of those the
	// cluster serves, that the process's plugins share; nil: the controllers' own.
	Shared *client.Shared
}

// Controllers are Stevedore's controllers, built and wired.
type Controllers struct {
	Provisioner *provision.Provisioner
	Lifecycle   *lifecycle.Lifecycle
	Disruption  *disruption.Controller
	// Nominations steer the successors of surged pods to the nodes planned for them (nil without a Queue).
	Nominations *surge.Nominations
}

// New builds the controllers and registers the informers they need; they start once the host's leadership is won
// (the informers of the host's factory must be started by the host). It runs in stages: clients and informers,
// the cloud provider, the controllers (a flat list, each run by one Run(ctx)), and their start.
// args are the plugin's arguments, defaulted and validated: each controller reads the ones it needs by their names.
func New(ctx context.Context, host Host, args config.ProvisionerArgs) (*Controllers, error) {
	if args.Region == "" {
		region, err := awscloud.Region(ctx, "", host.Env)
		if err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("AWS region found", "region", region)
		args.Region = region
	}
	kube, err := client.NewKube(host.KubeConfig)
	if err != nil {
		return nil, err
	}
	stevedore, err := client.NewStevedore(host.KubeConfig)
	if err != nil {
		return nil, err
	}
	shared := host.Shared
	if shared == nil {
		shared = &client.Shared{}
	}
	sf, err := shared.Informers(host.KubeConfig)
	if err != nil {
		return nil, err
	}
	in := newInformers(host.Informers, sf)
	in.registerOptional(ctx, shared, kube.Discovery(), optionalAPIs(args))
	in.nodePools = state.NormalizedNodePools(in.pools.Lister())
	if args.AdmissionWebhook != nil {
		if err := startWebhook(ctx, host, kube, *args.AdmissionWebhook); err != nil {
			return nil, err
		}
	}
	provider, err := newProvider(ctx, host, args, in)
	if err != nil {
		return nil, err
	}
	w := &wiring{ctx: ctx, host: host, args: args, kube: kube, stevedore: stevedore, in: in, provider: provider,
		overlaid: overlay.NewProvider(provider, in.overlays.Lister()), // every decision prices types under the overlays in force
		spotRisk: spotrisk.NewHistory(clock.RealClock{})}
	c, runs, err := w.controllers()
	if err != nil {
		return nil, err
	}
	in.sf.Start(ctx.Done())
	go start(ctx, host.Leadership, in, args, runs)
	return c, nil
}

// informerSet are the informers the controllers read: the host's (started by the host) and Stevedore's own.
type informerSet struct {
	kf         informers.SharedInformerFactory
	sf         externalversions.SharedInformerFactory
	nodes      coreinformers.NodeInformer
	pods       coreinformers.PodInformer
	daemonSets appsinformers.DaemonSetInformer
	// deployments, replicaSets and hpas are the owners a surge scales, and the HPAs that bound them.
	deployments appsinformers.DeploymentInformer
	replicaSets appsinformers.ReplicaSetInformer
	hpas        autoscalingv2informers.HorizontalPodAutoscalerInformer
	pdbs        policyinformers.PodDisruptionBudgetInformer
	claims      stevedoreinformers.NodeClaimInformer
	pools       stevedoreinformers.NodePoolInformer
	classes     stevedoreinformers.EC2NodeClassInformer
	buffers     stevedoreinformers.CapacityBufferInformer
	overlays    stevedoreinformers.NodeOverlayInformer
	// podGroups are the coscheduling PodGroups of gangs, workloadGroups the Workload API's; each nil where the
	// cluster does not serve them.
	podGroups      schedinformers.PodGroupInformer
	workloadGroups schedulinginformers.PodGroupInformer
	// requests are the ProvisioningRequests, templates the PodTemplates they and buffers name; requests is nil
	// where the cluster does not serve them.
	requests autoscalinginformers.ProvisioningRequestInformer
	// sharedBuffers and quotas are the autoscaling.x-k8s.io CapacityBuffers and CapacityQuotas; nil where they are
	// not served.
	sharedBuffers autoscalingv1beta1informers.CapacityBufferInformer
	quotas        autoscalingv1beta1informers.CapacityQuotaInformer
	// commitments are the Savings Plans and Reserved Instances declared; nil where their CRD is not installed.
	commitments stevedoreinformers.CommitmentInformer
	templates   coreinformers.PodTemplateInformer
	// resourceClaims and deviceClasses are what pods claiming devices ask for (kube-scheduler's own informers).
	resourceClaims resourceinformers.ResourceClaimInformer
	deviceClasses  resourceinformers.DeviceClassInformer
	nodePools      listers.NodePoolLister // in their canonical form, as every controller reads them
	// optional are the informers of the optional APIs registered (optionalAPIs).
	optional []cache.SharedIndexInformer
}

// trimmed has informers not started yet drop their objects' managed fields (one already started keeps them: that
// costs memory, nothing else).
func trimmed(infs ...cache.SharedIndexInformer) {
	for _, inf := range infs {
		_ = inf.SetTransform(client.TrimManagedFields) // refused only once started
	}
}

// newInformers registers the informers every cluster serves now, so that the host's factory starts them with its
// own (registerOptional adds the others).
func newInformers(kf informers.SharedInformerFactory, sf externalversions.SharedInformerFactory) *informerSet {
	in := &informerSet{kf: kf, sf: sf, nodes: kf.Core().V1().Nodes(), pods: kf.Core().V1().Pods(), daemonSets: kf.Apps().V1().DaemonSets(),
		pdbs: kf.Policy().V1().PodDisruptionBudgets(), claims: sf.Stevedore().V1().NodeClaims(), pools: sf.Stevedore().V1().NodePools(),
		classes: sf.Stevedore().V1().EC2NodeClasses(), buffers: sf.Stevedore().V1().CapacityBuffers(), overlays: sf.Stevedore().V1().NodeOverlays()}
	// asking for an informer registers it on its factory; those of the host's factory are trimmed as the
	// scheduler's own pods informer is (the scheduler's nodes informer among them)
	in.deployments, in.replicaSets, in.hpas = kf.Apps().V1().Deployments(), kf.Apps().V1().ReplicaSets(), kf.Autoscaling().V2().HorizontalPodAutoscalers()
	in.resourceClaims, in.deviceClasses = kf.Resource().V1().ResourceClaims(), kf.Resource().V1().DeviceClasses()
	trimmed(in.nodes.Informer(), in.daemonSets.Informer(), in.hpas.Informer(), in.pdbs.Informer())
	// the owners a surge scales keep who owns their replica count (a GitOps controller's is left alone)
	for _, inf := range []cache.SharedIndexInformer{in.deployments.Informer(), in.replicaSets.Informer()} {
		_ = inf.SetTransform(surge.KeepReplicasOwners) // refused only once started
	}
	in.pods.Informer()
	in.claims.Informer()
	in.pools.Informer()
	in.classes.Informer()
	in.overlays.Informer()
	in.resourceClaims.Informer()
	in.deviceClasses.Informer()
	return in
}

// quotaLister lists the CapacityQuotas; nil where they are not served.
func (in *informerSet) quotaLister() autoscalingv1beta1listers.CapacityQuotaLister {
	if in.quotas == nil {
		return nil
	}
	return in.quotas.Lister()
}

// commitmentLister lists the Commitments; nil where they are not served.
func (in *informerSet) commitmentLister() listers.CommitmentLister {
	if in.commitments == nil {
		return nil
	}
	return in.commitments.Lister()
}

// gangs finds the PodGroups of gangs; nil where the cluster does not serve them.
func (in *informerSet) gangs() gang.Groups {
	if in.podGroups == nil {
		return nil
	}
	return gang.ListerGroups{Lister: in.podGroups.Lister()}
}

// workloads finds the Workload API's PodGroups; nil where the cluster does not serve them.
func (in *informerSet) workloads() gang.WorkloadGroups {
	if in.workloadGroups == nil {
		return nil
	}
	return gang.WorkloadListerGroups{Lister: in.workloadGroups.Lister()}
}

// synced are the informers the controllers wait for.
func (in *informerSet) synced() []cache.InformerSynced {
	synced := []cache.InformerSynced{in.claims.Informer().HasSynced, in.pools.Informer().HasSynced, in.classes.Informer().HasSynced,
		in.nodes.Informer().HasSynced, in.pods.Informer().HasSynced, in.daemonSets.Informer().HasSynced, in.pdbs.Informer().HasSynced,
		in.buffers.Informer().HasSynced, in.overlays.Informer().HasSynced, in.resourceClaims.Informer().HasSynced,
		in.deviceClasses.Informer().HasSynced}
	for _, inf := range in.optional {
		synced = append(synced, inf.HasSynced)
	}
	return synced
}

// newProvider builds the AWS provider from what EKS says new nodes need to join (never guessed; clusterEndpoint
// overrides the endpoint EKS gives).
func newProvider(ctx context.Context, host Host, args config.ProvisionerArgs, in *informerSet) (*awscloud.Provider, error) {
	cluster, err := awscloud.DescribeCluster(ctx, args.Region, args.ClusterName, host.Env)
	if err != nil {
		return nil, fmt.Errorf("the nodes Stevedore launches need the cluster's endpoint, certificate authority and "+
			"Service range, which it reads from EKS: allow eks:DescribeCluster on cluster %q to the controller's role "+
			"(deploy/iam) and check clusterName and region: %w", args.ClusterName, err)
	}
	endpoint := cluster.Endpoint
	if args.ClusterEndpoint != "" {
		endpoint = args.ClusterEndpoint
	}
	klog.FromContext(ctx).Info("Cluster described by EKS", "cluster", args.ClusterName, "endpoint", endpoint,
		"serviceCIDR", cluster.ServiceCIDR, "ipFamily", cluster.IPFamily)
	provider, err := awscloud.New(ctx, awscloud.Options{
		ClusterName: args.ClusterName, ClusterEndpoint: endpoint, CABundle: cluster.CABundle, ServiceCIDR: cluster.ServiceCIDR,
		Region: args.Region, Env: host.Env, NodeClasses: in.classes.Lister(),
		KubernetesVersion:              func(context.Context) (string, error) { return serverMinor(host.ClientSet) },
		KubernetesVersionCheckInterval: args.KubernetesVersionCheckInterval.Duration, MaxInstanceTypes: args.MaxInstanceTypes,
		VMMemoryOverheadPercent: *args.VMMemoryOverheadPercent, EmbeddedCatalog: args.EmbeddedCatalog,
	})
	if err != nil {
		return nil, fmt.Errorf("AWS provider: %w", err)
	}
	return provider, nil
}

// startWebhook serves the admission webhook from this replica, whether it leads or not: the API server calls any
// of them. It reads namespaces from the host's informers.
func startWebhook(ctx context.Context, host Host, kube kubernetes.Interface, args config.AdmissionWebhookArgs) error {
	namespaces := host.Informers.Core().V1().Namespaces().Lister()
	srv := &admission.Server{Port: args.Port,
		Handler: &admission.Handler{SchedulerName: host.SchedulerName, Logger: klog.FromContext(ctx),
			Namespaces: func(ctx context.Context, name string) (map[string]string, error) {
				ns, err := namespaces.Get(name)
				if err != nil { // not in the informer yet (a new namespace, or before it synced): ask the API server
					ns, err = kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
				}
				if err != nil {
					return nil, err
				}
				return ns.Labels, nil
			}},
		Certs: &admission.Certificates{Kube: kube, Namespace: args.Namespace, Secret: args.Secret, Service: args.Service,
			Configuration: args.Configuration, Clock: clock.RealClock{}},
	}
	return srv.Start(ctx)
}

// run is one controller's loop.
type run struct {
	name string
	run  func(ctx context.Context)
}

// wiring is what building the controllers needs.
type wiring struct {
	ctx       context.Context
	host      Host
	args      config.ProvisionerArgs
	kube      kubernetes.Interface
	stevedore versioned.Interface
	in        *informerSet
	provider  *awscloud.Provider
	overlaid  cloud.Provider
	// terminator drains and terminates deleted NodeClaims' nodes (built with the lifecycle, run on its own).
	terminator *termination.Terminator
	// requests serves ProvisioningRequests; nil where the cluster does not serve them.
	requests *provreq.Controller
	// spotRisk is the history of Spot interruptions interruption records and provisioning reads.
	spotRisk *spotrisk.History
}

// simulator is a scheduler framework over a snapshot of its own, reading the host's informers.
func (w *wiring) simulator() (*simulation.Simulator, error) {
	return simulation.New(w.ctx, simulation.NewSnapshot(), simulation.Options{Informers: w.in.kf, Client: w.kube})
}

// controllers builds every controller and lists the loops to run.
func (w *wiring) controllers() (*Controllers, []run, error) {
	c := &Controllers{}
	var err error
	if c.Provisioner, c.Lifecycle, err = w.provisioner(); err != nil {
		return nil, nil, err
	}
	if w.requests, err = w.provisioningRequests(c.Provisioner); err != nil {
		return nil, nil, err
	}
	if w.host.Queue != nil {
		c.Nominations = surge.NewNominations(surge.NominationOptions{Kube: w.kube, Queue: w.host.Queue, Recorder: w.host.Recorder})
	}
	if c.Disruption, err = w.disruption(c.Provisioner, c.Nominations); err != nil {
		return nil, nil, err
	}
	runs := []run{
		{"provisioner", c.Provisioner.Run},
		{"pending pods", func(ctx context.Context) { c.Provisioner.WatchPending(ctx, 3*time.Second) }},
		{"nodeclaim lifecycle", c.Lifecycle.Run},
		{"termination", w.terminator.Run},
		{"kubernetes version", w.provider.FollowKubernetesVersion},
		{"instance-type catalog", func(ctx context.Context) {
			w.provider.WatchCatalog(ctx, func(ctx context.Context) {
				c.Provisioner.OfferingsChanged()
				c.Provisioner.NodePoolsChanged(ctx)
			})
		}},
		{"ec2nodeclass status", awscloud.NewNodeClassStatus(w.provider, w.stevedore, w.in.classes, w.in.claims, w.host.Recorder).Run},
		{"nodeoverlay status", overlaystatus.NewController(w.stevedore, w.in.overlays, func(ctx context.Context) {
			c.Provisioner.OfferingsChanged()
			c.Provisioner.NodePoolsChanged(ctx)
		}).Run},
		{"disruption", c.Disruption.Run},
		{"static nodepools", staticpool.New(staticpool.Options{Stevedore: w.stevedore, NodePools: w.in.nodePools, Pods: w.in.pods.Lister(),
			Provisioner: c.Provisioner, Recorder: w.host.Recorder}).Run},
	}
	if w.in.commitments != nil {
		runs = append(runs, run{"commitment status", commitmentstatus.NewController(w.stevedore, w.in.commitments, c.Provisioner.Coverage).Run})
	}
	if w.in.podGroups != nil {
		groups, err := gangstatus.New(gangstatus.Options{Client: w.stevedore, PodGroups: w.in.podGroups.Lister(), Pods: w.in.pods.Lister()},
			w.in.podGroups.Informer(), w.in.pods.Informer())
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, run{"podgroup status", groups.Run})
	}
	more, err := w.beside(c)
	if err != nil {
		return nil, nil, err
	}
	return c, append(runs, more...), nil
}

// provisioner builds the provisioner and the NodeClaim lifecycle, and has NodePool changes reach the provisioner.
func (w *wiring) provisioner() (*provision.Provisioner, *lifecycle.Lifecycle, error) {
	sim, err := w.simulator()
	if err != nil {
		return nil, nil, err
	}
	in, classes := w.in, w.in.classes.Lister()
	p := provision.New(provision.Options{Args: w.args, SchedulerName: w.host.SchedulerName,
		Kube: w.kube, Stevedore: w.stevedore, Nodes: in.nodes.Lister(), Pods: in.pods.Lister(), DaemonSets: in.daemonSets.Lister(),
		Deployments: in.deployments.Lister(), ReplicaSets: in.replicaSets.Lister(),
		NodeClaims: in.claims.Lister(), NodePools: in.nodePools, Cloud: w.overlaid, Simulator: sim, Recorder: w.host.Recorder,
		Queue: w.host.Queue, Gangs: in.gangs(), WorkloadGroups: in.workloads(), Quotas: in.quotaLister(), Commitments: in.commitmentLister(),
		SpotRisk: w.spotRisk,
		Devices:  provision.DeviceObjects{Claims: in.resourceClaims.Lister(), Classes: in.deviceClasses.Lister()},
		NodeClassHash: func(_ context.Context, ref *stevedorev1.NodeClassReference) string {
			if nc, err := classes.Get(ref.Name); err == nil {
				return awscloud.NodeClassHash(nc)
			}
			return ""
		},
	})
	w.terminator = termination.New(termination.Options{Kube: w.kube, Stevedore: w.stevedore, Cloud: w.overlaid, Nodes: in.nodes.Lister(),
		Pods: in.pods.Lister(), NodeClaims: in.claims.Lister(), Recorder: w.host.Recorder, Provisioning: p})
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Stevedore: w.stevedore, Cloud: w.overlaid, Nodes: in.nodes.Lister(),
		NodeClaims: in.claims.Lister(), Recorder: w.host.Recorder, Args: w.args, OnInitialized: w.host.OnInitialized, Provisioning: p, Terminator: w.terminator})
	if err := p.Register(w.ctx, in.claims.Informer(), in.pods.Informer(), in.nodes.Informer()); err != nil {
		return nil, nil, err
	}
	if err := lc.Register(w.ctx, in.claims.Informer(), in.nodes.Informer()); err != nil {
		return nil, nil, err
	}
	if err := w.wakeOnChanges(p); err != nil {
		return nil, nil, err
	}
	return p, lc, nil
}

// wakeOnChanges has the changes that may let an unprovisionable pod have a node reach the provisioner: a NodePool's
// spec, an EC2NodeClass that changes or becomes ready, a CapacityQuota added, changed or removed.
func (w *wiring) wakeOnChanges(p *provision.Provisioner) error {
	ctx, in := w.ctx, w.in
	if _, err := in.pools.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { p.NodePoolsChanged(ctx) },
		// a spec change only: the status, rewritten every few seconds, changes nothing a pod could use
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*stevedorev1.NodePool)
			n, okNew := newObj.(*stevedorev1.NodePool)
			if !okOld || !okNew || o.Generation != n.Generation {
				p.NodePoolsChanged(ctx)
			}
		},
	}); err != nil {
		return err
	}
	// an EC2NodeClass that becomes ready (its finalizer lets the instance profile be made, its status follows
	// AWS) or changes may let a NodePool that could launch nothing launch again
	if _, err := in.classes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { p.NodeClassesChanged(ctx) },
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*stevedorev1.EC2NodeClass)
			n, okNew := newObj.(*stevedorev1.EC2NodeClass)
			if !okOld || !okNew || nodeClassChanged(o, n) {
				p.NodeClassesChanged(ctx)
			}
		},
	}); err != nil {
		return err
	}
	if in.quotas != nil {
		// a quota added, raised or removed may leave room for pods it kept from a node (its status changes nothing)
		if _, err := in.quotas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { p.NodePoolsChanged(ctx) },
			UpdateFunc: func(oldObj, newObj any) {
				o, okOld := oldObj.(*autoscalingv1beta1.CapacityQuota)
				n, okNew := newObj.(*autoscalingv1beta1.CapacityQuota)
				if !okOld || !okNew || o.Generation != n.Generation {
					p.NodePoolsChanged(ctx)
				}
			},
			DeleteFunc: func(any) { p.NodePoolsChanged(ctx) },
		}); err != nil {
			return err
		}
	}
	return nil
}

// nodeClassChanged reports whether an EC2NodeClass changed in what decides if its NodePools can launch: its spec,
// its finalizers (the managed instance profile waits for Stevedore's), or the status of a condition.
func nodeClassChanged(o, n *stevedorev1.EC2NodeClass) bool {
	if o.Generation != n.Generation || !slices.Equal(o.Finalizers, n.Finalizers) || len(o.Status.Conditions) != len(n.Status.Conditions) {
		return true
	}
	for _, c := range n.Status.Conditions {
		if was := meta.FindStatusCondition(o.Status.Conditions, c.Type); was == nil || was.Status != c.Status {
			return true
		}
	}
	return false
}

// booked reports whether a ProvisioningRequest's booking holds; nil where the cluster does not serve them.
func (w *wiring) booked() func(string) bool {
	if w.requests == nil {
		return nil
	}
	return w.requests.Holds
}

// provisioningRequests builds the ProvisioningRequest controller; nil where the cluster does not serve them.
func (w *wiring) provisioningRequests(p *provision.Provisioner) (*provreq.Controller, error) {
	in := w.in
	if in.requests == nil {
		return nil, nil
	}
	sim, err := w.simulator()
	if err != nil {
		return nil, err
	}
	c := provreq.New(provreq.Options{Kube: w.kube, Stevedore: w.stevedore, Requests: in.requests.Lister(),
		Templates: in.templates.Lister(), Pods: in.pods.Lister(), Nodes: in.nodes.Lister(), NodeClaims: in.claims.Lister(),
		Provisioner: p, Simulator: sim, Recorder: w.host.Recorder, BookingTime: w.args.ProvisioningRequestBookingTime.Duration})
	if err := c.Register(in.pods.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// disruption builds the disruption controller, which prices candidates under the NodeOverlays in force.
// surger moves disrupted pods make-before-break; nil when the surge argument is off: every pod is evicted.
func (w *wiring) surger(nominations *surge.Nominations) *surge.Surger {
	if !*w.args.Surge {
		return nil
	}
	in := w.in
	return surge.New(surge.Options{Kube: w.kube, Pods: in.pods.Lister(), ReplicaSets: in.replicaSets.Lister(),
		Deployments: in.deployments.Lister(), HPAs: in.hpas.Lister(), GitOpsManagers: w.args.GitOpsFieldManagers, Nominations: nominations})
}

func (w *wiring) disruption(p *provision.Provisioner, nominations *surge.Nominations) (*disruption.Controller, error) {
	sim, err := w.simulator()
	if err != nil {
		return nil, err
	}
	in, overlays := w.in, w.in.overlays.Lister()
	d := disruption.New(disruption.Options{Args: w.args,
		Kube: w.kube, Stevedore: w.stevedore, Nodes: in.nodes.Lister(), Pods: in.pods.Lister(), PDBs: in.pdbs.Lister(),
		NodeClaims: in.claims.Lister(), NodePools: in.nodePools, Provisioner: p, Cloud: w.overlaid, Simulator: sim,
		Recorder: w.host.Recorder, Booked: w.booked(), Surge: w.surger(nominations), Coverage: p.Coverage,
		OverlaidTypes: func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool) {
			list, err := overlays.List(labels.Everything())
			if err != nil || overlay.NewSet(list).Empty() {
				return nil, false
			}
			its, err := p.InstanceTypes(ctx, np)
			return its, err == nil
		},
	})
	if err := d.Register(in.pods.Informer()); err != nil {
		return nil, err
	}
	return d, nil
}

// beside builds the loops that run beside provisioning and disruption: interruption (the queue's notices, when
// a queue is configured, and Capacity Blocks about to end), status reporting, warm capacity and pod deletion cost.
func (w *wiring) beside(c *Controllers) ([]run, error) {
	in := w.in
	interrupts := interruption.New(interruption.Options{Args: w.args,
		Queue: w.provider.SQS(), NodeClaims: in.claims.Lister(), Interrupter: c.Disruption,
		Offerings: offeringsMarker{provider: w.provider, prov: c.Provisioner}, History: w.spotRisk, Recorder: w.host.Recorder, Reservations: w.provider,
		Pods: in.pods.Lister(), Gangs: in.gangs(), WorkloadGroups: in.workloads(),
	})
	reporter := report.New(report.Options{Stevedore: w.stevedore, NodePools: in.nodePools, NodeClaims: in.claims.Lister(), NodeClasses: in.classes.Lister(),
		Nodes: in.nodes.Lister(), Pods: in.pods.Lister(), SchedulerName: w.host.SchedulerName, UnavailableOfferings: w.provider.UnavailableOfferings().Len,
		Prices: w.overlaid, CostTop: int(*w.args.CostMetricsTop)})
	if err := reporter.RegisterPodStartup(in.pods.Informer()); err != nil {
		return nil, err
	}
	sim, err := w.simulator()
	if err != nil {
		return nil, err
	}
	var runs []run
	var bookings func() []*corev1.Pod // the ProvisioningRequests' pods, which take room ahead of the buffers'
	if w.requests != nil {
		bookings = w.requests.Pods
		runs = append(runs, run{"provisioning requests", w.requests.Run})
	}
	var shared autoscalingv1beta1listers.CapacityBufferLister
	if in.sharedBuffers != nil {
		shared = in.sharedBuffers.Lister()
	}
	warm := buffer.New(buffer.Options{Kube: w.kube, Stevedore: w.stevedore, Buffers: in.buffers.Lister(), Shared: shared, Provisioner: c.Provisioner,
		Simulator: sim, Recorder: w.host.Recorder, Ahead: bookings})
	if bookings != nil {
		c.Provisioner.SetWarmPods(bookings, warm.Pods)
	} else {
		c.Provisioner.SetWarmPods(warm.Pods)
	}
	runs = append(runs, run{"capacity buffers", warm.Run}, run{"status", reporter.Run}, run{"capacity blocks", interrupts.RunCapacityBlocks})
	if in.quotas != nil {
		quotas := quota.New(quota.Options{Stevedore: w.stevedore, Quotas: in.quotas.Lister(), NodeClaims: in.claims.Lister(),
			Nodes: in.nodes.Lister(), Reached: c.Provisioner.QuotasReached, PlannedCapacity: c.Provisioner.PlannedCapacity, Recorder: w.host.Recorder})
		runs = append(runs, run{"capacity quotas", quotas.Run})
	}
	if *w.args.PodDeletionCost {
		costs := deletioncost.New(deletioncost.Options{Kube: w.kube, Pods: in.pods.Lister(), Nodes: in.nodes.Lister(),
			NodeClaims: in.claims.Lister(), NodePools: in.nodePools})
		runs = append(runs, run{"pod deletion cost", costs.Run})
	}
	if w.args.InterruptionQueue != "" {
		runs = append(runs, run{"interruption queue", interrupts.Run})
	} else {
		klog.FromContext(w.ctx).Info("No interruption queue configured: spot interruptions and maintenance events are not handled")
	}
	return runs, nil
}

// start runs every loop once this process leads and the informers have synced.
func start(ctx context.Context, leadership *state.Leadership, in *informerSet, args config.ProvisionerArgs, runs []run) {
	select {
	case <-leadership.Elected():
	case <-ctx.Done():
		return
	}
	if !cache.WaitForCacheSync(ctx.Done(), in.synced()...) {
		return
	}
	logger := klog.FromContext(ctx)
	logger.Info("Stevedore controllers starting", "clusterName", args.ClusterName, "region", args.Region, "loops", len(runs))
	for _, r := range runs {
		logger.V(2).Info("Starting loop", "loop", r.name)
		go r.run(ctx)
	}
}

// serverMinor is the API server's major.minor version ("1.37"), as the EKS AMI parameters name it: its major and
// minor fields (EKS reports minor "35+"), else read from its git version.
func serverMinor(cs kubernetes.Interface) (string, error) {
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	minor := strings.TrimRight(info.Minor, "+")
	if info.Major != "" && info.Major != "0" && minor != "" {
		return info.Major + "." + minor, nil
	}
	if v, err := version.ParseGeneric(info.GitVersion); err == nil && v.Major() > 0 {
		return fmt.Sprintf("%d.%d", v.Major(), v.Minor()), nil
	}
	return "", fmt.Errorf("the API server reports no version (major %q, minor %q, gitVersion %q)", info.Major, info.Minor, info.GitVersion)
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
