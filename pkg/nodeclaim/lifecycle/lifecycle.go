/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package lifecycle drives a NodeClaim from creation to a node ready for pods, one phase per file: launch (the
// instance through the cloud), registration (the Node gets the NodeClaim's labels, taints, finalizer and owner),
// initialization (Ready, startup taints gone) and liveness (a node that never registers is deleted with its
// instance). A deleted NodeClaim is handed to termination. What it needs from provisioning (the pods planned on
// a NodeClaim, instance types, DaemonSets) it asks through the Provisioning interface it declares.
package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	typedv1 "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/typed/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Event reasons the lifecycle records on NodeClaims: one event for a launch, naming the instance, its node and the
// pods planned there; the registration and initialization are recorded in the NodeClaim's conditions (Registered,
// Initialized, with their times), not in events, and the failures in events of their own.
const (
	ReasonLaunched            = "Launched"
	ReasonLaunchFailed        = "LaunchFailed"
	ReasonRegistrationTimeout = "RegistrationTimeout"
)

// defaultLaunchWorkers bounds concurrent launches when Options leave it unset.
const defaultLaunchWorkers = 16

// Provisioning is what the lifecycle needs from provisioning (pkg/provision).
type Provisioning interface {
	// AssignedPods returns the pods planned on a NodeClaim.
	AssignedPods(claim string) []*corev1.Pod
	// NominateAssigned nominates a launched NodeClaim's planned pods to its node.
	NominateAssigned(ctx context.Context, claim *stevedorev1.NodeClaim)
	// Replan drops a pod's plan and provisions it again.
	Replan(ctx context.Context, pod *corev1.Pod)
	// ClaimInitialized is told a NodeClaim's node is ready for pods.
	ClaimInitialized(ctx context.Context, name string)
	// NodePoolsChanged is told there may be room again under a NodePool's limits.
	NodePoolsChanged(ctx context.Context)
	// OfferingsChanged is told the cloud marked offerings unavailable.
	OfferingsChanged()
	// InstanceTypesOf returns the known instance types by name, with a NodeClaim's NodePool's loaded.
	InstanceTypesOf(ctx context.Context, claim *stevedorev1.NodeClaim) map[string]*cloud.InstanceType
	// DaemonSetPods returns the DaemonSet pods that run on the node a NodeClaim becomes.
	DaemonSetPods(ctx context.Context, claim *stevedorev1.NodeClaim) []*corev1.Pod
	// ExpectDaemons keeps room on a node for the DaemonSet pods that will run on it.
	ExpectDaemons(node string, pods []*corev1.Pod)
}

// Terminator is what the lifecycle hands deleted NodeClaims and their nodes to (pkg/nodeclaim/termination).
type Terminator interface {
	// TerminateClaim takes a deleted NodeClaim a step towards its end; it returns when to look again.
	TerminateClaim(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error)
	// EnqueueNode asks for a deleted node to be drained.
	EnqueueNode(name string)
}

// Options are the lifecycle's clients, listers, settings and collaborators.
type Options struct {
	Kube       kubernetes.Interface
	Stevedore  versioned.Interface
	Cloud      cloud.Provider
	Nodes      corelisters.NodeLister
	NodeClaims listers.NodeClaimLister
	Recorder   events.EventRecorder
	Clock      clock.Clock
	// Args are the plugin's arguments; the lifecycle reads, by their names: region (a label of every node) and
	// registrationTimeout (how long a launched instance may take to register its node before it is deleted). New
	// defaults what is unset, so the zero value is every default.
	Args config.ProvisionerArgs
	// LaunchWorkers bounds concurrent launches (identical launches share a CreateFleet call); 16 when 0.
	LaunchWorkers int
	// OnInitialized is called with a node's name when its NodeClaim becomes initialized (Permit lets pods bind).
	OnInitialized func(nodeName string)
	// Provisioning is asked about planned pods and told what changed. Required.
	Provisioning Provisioning
	// Terminator finishes deleted NodeClaims and drains their nodes (run on its own). Required.
	Terminator Terminator
}

// Lifecycle is the NodeClaim lifecycle controller.
type Lifecycle struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[string]
	// byProviderID is the NodeClaims informer's store, indexed by provider ID (Register): a node not labelled with its
	// NodeClaim yet is matched by its provider ID without a walk over every NodeClaim
	byProviderID cache.Indexer
}

// providerIDIndex names the NodeClaims informer's index of their status.providerID.
const providerIDIndex = "stevedore.sh/providerID"

func providerIDOf(obj any) ([]string, error) {
	if c, ok := obj.(*stevedorev1.NodeClaim); ok && c.Status.ProviderID != "" {
		return []string{c.Status.ProviderID}, nil
	}
	return nil, nil
}

// New returns the controller; Register wires it to informers and Run starts it.
func New(opts Options) *Lifecycle {
	if opts.LaunchWorkers == 0 {
		opts.LaunchWorkers = defaultLaunchWorkers
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Args = opts.Args.Defaults(nil)
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute)
	return &Lifecycle{
		opts:  opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeclaims"}),
	}
}

// Register adds event handlers: NodeClaim changes and the Nodes of NodeClaims enqueue the NodeClaim; deleted
// Stevedore nodes enqueue their termination; a deleted NodeClaim may leave room under its NodePool's limits.
// (Provisioning's plans follow the deletions of NodeClaims and pods themselves.)
func (l *Lifecycle) Register(ctx context.Context, claims, nodes cache.SharedIndexInformer) error {
	prov := l.opts.Provisioning
	if _, indexed := claims.GetIndexer().GetIndexers()[providerIDIndex]; !indexed {
		if err := claims.AddIndexers(cache.Indexers{providerIDIndex: providerIDOf}); err != nil {
			return fmt.Errorf("indexing NodeClaims by provider ID: %w", err)
		}
	}
	l.byProviderID = claims.GetIndexer()
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueueClaim(obj) },
		UpdateFunc: func(_, obj any) { l.enqueueClaim(obj) },
		DeleteFunc: func(obj any) {
			if _, ok := reconcile.Deleted[*stevedorev1.NodeClaim](obj); ok {
				prov.NodePoolsChanged(ctx) // room under a NodePool's limits
			}
		},
	}); err != nil {
		return err
	}
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueueNode(obj) },
		UpdateFunc: func(_, obj any) { l.enqueueNode(obj) },
	})
	return err
}

func (l *Lifecycle) enqueueClaim(obj any) {
	if c, ok := obj.(*stevedorev1.NodeClaim); ok {
		l.queue.Add(c.Name)
	}
}

func (l *Lifecycle) enqueueNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if name := n.Labels[stevedorev1.LabelNodeClaim]; name != "" {
		l.queue.Add(name)
	} else if c := l.claimByProviderID(n.Spec.ProviderID); c != nil {
		l.queue.Add(c.Name)
	}
	if n.DeletionTimestamp != nil && stevedorev1.HasTerminationFinalizer(n.Finalizers) {
		l.opts.Terminator.EnqueueNode(n.Name)
	}
}

// claimByProviderID returns the NodeClaim of an instance, nil when none has its provider ID (the index is Register's).
func (l *Lifecycle) claimByProviderID(id string) *stevedorev1.NodeClaim {
	if id == "" {
		return nil
	}
	objs, _ := l.byProviderID.ByIndex(providerIDIndex, id)
	var found *stevedorev1.NodeClaim
	for _, obj := range objs { // one, but for a provider ID reused: the first by name
		if c, ok := obj.(*stevedorev1.NodeClaim); ok && (found == nil || c.Name < found.Name) {
			found = c
		}
	}
	return found
}

// Run processes NodeClaims until ctx ends; every NodeClaim is also looked at every 30s. (The terminator runs on
// its own.)
func (l *Lifecycle) Run(ctx context.Context) {
	defer l.queue.ShutDown()
	for i := 0; i < l.opts.LaunchWorkers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { reconcile.Process(ctx, l.queue, "NodeClaim", l.reconcile) }, time.Second)
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		claims, _ := l.opts.NodeClaims.List(labels.Everything())
		for _, c := range claims {
			l.queue.Add(c.Name)
		}
	}, 30*time.Second)
}

// reconcile moves one NodeClaim a step along; it returns when to look again.
func (l *Lifecycle) reconcile(ctx context.Context, name string) (time.Duration, error) {
	claim, err := l.opts.NodeClaims.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil // its plan went when the informer saw it go
	}
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx).WithValues("nodeclaim", name)
	ctx = klog.NewContext(ctx, logger)
	switch {
	case claim.DeletionTimestamp != nil:
		return l.opts.Terminator.TerminateClaim(ctx, claim)
	case !meta.IsStatusConditionTrue(claim.Status.Conditions, stevedorev1.ConditionLaunched):
		return l.launch(ctx, claim)
	case !meta.IsStatusConditionTrue(claim.Status.Conditions, stevedorev1.ConditionRegistered):
		return l.register(ctx, claim)
	case !claim.IsInitialized():
		return l.initialize(ctx, claim)
	}
	return 0, nil
}

// claims is the NodeClaims API.
func (l *Lifecycle) claims() typedv1.NodeClaimInterface {
	return l.opts.Stevedore.StevedoreV1().NodeClaims()
}

func (l *Lifecycle) setCondition(ctx context.Context, name, condType string, status metav1.ConditionStatus, reason, message string) error {
	_, err := l.setConditions(ctx, name, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	return err
}

// maxConditionMessage bounds a condition's message (the API server refuses longer ones).
const maxConditionMessage = 1000

// setConditions sets conditions on a NodeClaim's status in one update; it reports whether any changed. It starts
// from the cache's copy (a conflict reads the NodeClaim again): a burst's hundreds of NodeClaims each move through
// their phases, and a read before each write was as many more requests to the API server.
func (l *Lifecycle) setConditions(ctx context.Context, name string, conds ...metav1.Condition) (bool, error) {
	changed := false
	var cached *stevedorev1.NodeClaim
	if c, err := l.opts.NodeClaims.Get(name); err == nil {
		cached = c.DeepCopy()
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := cached
		cached = nil
		if cur == nil {
			got, err := l.claims().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		changed = false
		for _, c := range conds {
			c.Message = truncate(c.Message, maxConditionMessage)
			c.ObservedGeneration = cur.Generation
			changed = meta.SetStatusCondition(&cur.Status.Conditions, c) || changed
		}
		if !changed {
			return nil
		}
		_, err := l.claims().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return changed, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// event records an event on a NodeClaim.
func (l *Lifecycle) event(claim *stevedorev1.NodeClaim, eventType, reason, action, note string, args ...any) {
	if l.opts.Recorder == nil {
		return
	}
	l.opts.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...)
}
