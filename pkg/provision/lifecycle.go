package provision

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// LifecycleOptions configure the NodeClaim lifecycle controller.
type LifecycleOptions struct {
	RegistrationTimeout time.Duration
	// LaunchWorkers bounds concurrent launches (identical launches share a CreateFleet call).
	LaunchWorkers int
	// OnInitialized is called with a node's name when its NodeClaim becomes initialized (Permit lets pods bind).
	OnInitialized func(nodeName string)
}

// Lifecycle drives NodeClaims from launch to initialization and through termination: launch through the cloud,
// registration of the Node (labels, taints, finalizer, owner), initialization (Ready, startup taints gone), and
// liveness (a node that never registers is deleted with its instance).
type Lifecycle struct {
	prov  *Provisioner
	opts  LifecycleOptions
	queue workqueue.TypedRateLimitingInterface[string]
	nodes workqueue.TypedRateLimitingInterface[string]
}

// NewLifecycle returns the controller; Register wires it to informers and Run starts it.
func NewLifecycle(prov *Provisioner, opts LifecycleOptions) *Lifecycle {
	if opts.LaunchWorkers == 0 {
		opts.LaunchWorkers = 16
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute)
	return &Lifecycle{
		prov:  prov,
		opts:  opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeclaims"}),
		nodes: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-termination"}),
	}
}

// Register adds event handlers: NodeClaim changes and the Nodes of NodeClaims enqueue the NodeClaim; deleted
// Stevedore nodes enqueue their termination.
func (l *Lifecycle) Register(claims, nodes cache.SharedIndexInformer) error {
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueueClaim(obj) },
		UpdateFunc: func(_, obj any) { l.enqueueClaim(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if c, ok := obj.(*stevedorev1.NodeClaim); ok {
				l.prov.ForgetClaim(c.Name)
				l.prov.NodePoolsChanged() // room under a NodePool's limits
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
	if n.DeletionTimestamp != nil && hasFinalizer(n.Finalizers, stevedorev1.TerminationFinalizer) {
		l.nodes.Add(n.Name)
	}
}

func (l *Lifecycle) claimByProviderID(id string) *stevedorev1.NodeClaim {
	if id == "" {
		return nil
	}
	claims, _ := l.prov.opts.NodeClaims.List(labels.Everything())
	for _, c := range claims {
		if c.Status.ProviderID == id {
			return c
		}
	}
	return nil
}

// Run processes NodeClaims and node terminations until ctx ends; every NodeClaim is also looked at every 30s.
func (l *Lifecycle) Run(ctx context.Context) {
	defer l.queue.ShutDown()
	defer l.nodes.ShutDown()
	for i := 0; i < l.opts.LaunchWorkers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { l.process(ctx) }, time.Second)
	}
	for i := 0; i < 4; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { l.processNode(ctx) }, time.Second)
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		claims, _ := l.prov.opts.NodeClaims.List(labels.Everything())
		for _, c := range claims {
			l.queue.Add(c.Name)
		}
	}, 30*time.Second)
}

func (l *Lifecycle) process(ctx context.Context) {
	for {
		name, quit := l.queue.Get()
		if quit {
			return
		}
		after, err := l.reconcile(ctx, name)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("NodeClaim reconcile failed; retrying", "nodeclaim", name, "err", err)
			l.queue.AddRateLimited(name)
		case after > 0:
			l.queue.Forget(name)
			l.queue.AddAfter(name, after)
		default:
			l.queue.Forget(name)
		}
		l.queue.Done(name)
	}
}

// reconcile moves one NodeClaim a step along; it returns when to look again.
func (l *Lifecycle) reconcile(ctx context.Context, name string) (time.Duration, error) {
	claim, err := l.prov.opts.NodeClaims.Get(name)
	if apierrors.IsNotFound(err) {
		l.prov.ForgetClaim(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx).WithValues("nodeclaim", name)
	ctx = klog.NewContext(ctx, logger)
	switch {
	case claim.DeletionTimestamp != nil:
		return l.terminateClaim(ctx, claim)
	case !conditionTrue(claim.Status.Conditions, stevedorev1.ConditionLaunched):
		return l.launch(ctx, claim)
	case !conditionTrue(claim.Status.Conditions, stevedorev1.ConditionRegistered):
		return l.register(ctx, claim)
	case !IsInitialized(claim):
		return l.initialize(ctx, claim)
	}
	return 0, nil
}

// launch creates the NodeClaim's instance.
func (l *Lifecycle) launch(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	p := l.prov
	inst, err := p.opts.Cloud.Create(ctx, claim)
	if err != nil {
		var ice *cloud.InsufficientCapacityError
		var notReady *cloud.NodeClassNotReadyError
		var config *cloud.LaunchConfigurationError
		switch {
		case errors.As(err, &ice):
			logger.Info("No capacity for the NodeClaim in any offering; deleting it so its pods are provisioned again", "tried", ice.Tried)
			p.claimEvent(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "no capacity: %v", err)
			metrics.LaunchFailures.WithLabelValues(claim.Labels[stevedorev1.LabelNodePool], "InsufficientCapacity").Inc()
			// the cloud marked the offerings it tried unavailable: plan the pods again on what is left, not on
			// the instance types cached before the launch
			p.OfferingsChanged()
			p.ForgetClaim(claim.Name)
			return 0, client(p).Delete(ctx, claim.Name, metav1.DeleteOptions{})
		case errors.As(err, &notReady), errors.As(err, &config):
			p.claimEvent(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "%v", err)
			metrics.LaunchFailures.WithLabelValues(claim.Labels[stevedorev1.LabelNodePool], "LaunchConfiguration").Inc()
			if uerr := l.setCondition(ctx, claim.Name, stevedorev1.ConditionLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error()); uerr != nil {
				return 0, uerr
			}
			if p.opts.Clock.Since(claim.CreationTimestamp.Time) > l.opts.RegistrationTimeout {
				logger.Info("NodeClaim could not launch before the registration timeout; deleting it", "err", err)
				p.ForgetClaim(claim.Name)
				return 0, client(p).Delete(ctx, claim.Name, metav1.DeleteOptions{})
			}
			return 0, err
		default:
			// throttling, 5xx, timeouts: the SDK retried already; the NodeClaim is tried again with backoff
			code := cloudErrorCode(err)
			logger.Info("Launch failed; retrying with backoff", "code", code, "err", err)
			p.claimEvent(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "launch failed (%s), retrying: %v", code, err)
			metrics.LaunchFailures.WithLabelValues(claim.Labels[stevedorev1.LabelNodePool], code).Inc()
			return 0, fmt.Errorf("launching: %w", err)
		}
	}
	its := p.knownTypes()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client(p).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.ProviderID, cur.Status.InstanceID, cur.Status.NodeName = inst.ProviderID, inst.ID, inst.NodeName
		cur.Status.InstanceType, cur.Status.Zone, cur.Status.CapacityType = inst.Type, inst.Zone, inst.CapacityType
		cur.Status.ImageID, cur.Status.Price = inst.ImageID, formatPrice(inst.Price)
		if it, ok := its[inst.Type]; ok {
			cur.Status.Capacity = it.Capacity
			cur.Status.Allocatable = it.Allocatable()
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionLaunched, Status: metav1.ConditionTrue,
			Reason: "Launched", Message: fmt.Sprintf("instance %s (%s in %s, %s)", inst.ID, inst.Type, inst.Zone, inst.CapacityType),
			ObservedGeneration: cur.Generation})
		_, err = client(p).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("recording the launch of %s: %w", inst.ID, err)
	}
	pods := p.AssignedPods(claim.Name)
	podNames := make([]string, 0, len(pods))
	for _, pod := range pods {
		podNames = append(podNames, pod.Namespace+"/"+pod.Name)
	}
	sort.Strings(podNames)
	logger.Info("Launched instance", "nodepool", claim.Labels[stevedorev1.LabelNodePool], "instance", inst.ID,
		"node", inst.NodeName, "type", inst.Type, "zone", inst.Zone, "capacityType", inst.CapacityType,
		"price", formatPrice(inst.Price), "pods", podNames)
	p.claimEvent(claim, corev1.EventTypeNormal, ReasonLaunched, "Launch", "launched %s: %s in %s, %s, $%s/h",
		inst.ID, inst.Type, inst.Zone, inst.CapacityType, formatPrice(inst.Price))
	launched, err := p.opts.NodeClaims.Get(claim.Name)
	if err != nil || launched.Status.NodeName == "" {
		launched, err = client(p).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
	}
	l.releaseOverflow(ctx, launched)
	p.NominateAssigned(ctx, launched)
	return l.opts.RegistrationTimeout, nil
}

// releaseOverflow hands back to provisioning the pods planned on a NodeClaim that the instance type EC2 picked
// cannot hold (it picked a type other than the cheapest planned).
func (l *Lifecycle) releaseOverflow(ctx context.Context, claim *stevedorev1.NodeClaim) {
	alloc := claim.Status.Allocatable
	if len(alloc) == 0 {
		return
	}
	pods := l.prov.AssignedPods(claim.Name)
	sort.Slice(pods, func(i, j int) bool {
		return solver.PodRequests(pods[i]).Weight() < solver.PodRequests(pods[j]).Weight()
	})
	capacity := solver.ListRequests(alloc)
	used := solver.Requests{}
	for _, ds := range l.daemonSetOverhead(ctx, claim) {
		used = used.Add(solver.PodRequests(ds))
	}
	for _, pod := range pods {
		if next := used.Add(solver.PodRequests(pod)); next.Fits(capacity) {
			used = next
			continue
		}
		klog.FromContext(ctx).Info("Launched instance type cannot hold a planned pod; provisioning it again", "pod", klog.KObj(pod), "type", claim.Status.InstanceType)
		l.prov.forgetPod(pod.UID)
	}
}

// daemonSetOverhead returns the DaemonSet pods that would run on the claim's node, as the scheduler's Filter
// plugins decide on the node the claim becomes.
func (l *Lifecycle) daemonSetOverhead(ctx context.Context, claim *stevedorev1.NodeClaim) []*corev1.Pod {
	return l.prov.daemonsOn(ctx, ClaimNode(claim, l.prov.knownTypes(), l.prov.opts.Region))
}

// register finds the Node of a launched NodeClaim and syncs it; a NodeClaim whose node does not register within
// the registration timeout is deleted with its instance.
func (l *Lifecycle) register(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	p := l.prov
	node := l.nodeOf(claim)
	if node == nil {
		launchedAt := launchTime(claim)
		if waited := p.opts.Clock.Since(launchedAt); waited > l.opts.RegistrationTimeout {
			klog.FromContext(ctx).Info("Node did not register in time; deleting the NodeClaim and its instance",
				"instance", claim.Status.InstanceID, "waited", waited.Round(time.Second))
			p.claimEvent(claim, corev1.EventTypeWarning, ReasonRegistrationLapse, "Register",
				"node %s did not register within %s", claim.Status.NodeName, l.opts.RegistrationTimeout)
			metrics.LaunchFailures.WithLabelValues(claim.Labels[stevedorev1.LabelNodePool], "RegistrationTimeout").Inc()
			p.ForgetClaim(claim.Name)
			return 0, client(p).Delete(ctx, claim.Name, metav1.DeleteOptions{})
		} else {
			return l.opts.RegistrationTimeout - waited + time.Second, nil
		}
	}
	// before syncNode lets pods in: the scheduler keeps the DaemonSet pods' room until they are bound
	p.ExpectDaemons(node.Name, l.daemonSetOverhead(ctx, claim))
	if err := l.syncNode(ctx, claim, node); err != nil {
		return 0, err
	}
	changed, err := l.setConditions(ctx, claim.Name, metav1.Condition{Type: stevedorev1.ConditionRegistered,
		Status: metav1.ConditionTrue, Reason: "Registered", Message: "node " + node.Name + " registered"})
	if err != nil || !changed {
		return 0, err
	}
	pool := claim.Labels[stevedorev1.LabelNodePool]
	klog.FromContext(ctx).Info("Registered node", "node", node.Name, "instance", claim.Status.InstanceID, "nodepool", pool,
		"type", claim.Status.InstanceType, "zone", claim.Status.Zone, "capacityType", claim.Status.CapacityType, "price", claim.Status.Price)
	metrics.NodesCreated.WithLabelValues(pool, claim.Status.Zone, claim.Status.CapacityType, claim.Status.InstanceType).Inc()
	p.claimEvent(claim, corev1.EventTypeNormal, ReasonRegistered, "Register", "node %s registered", node.Name)
	return 0, nil
}

func launchTime(claim *stevedorev1.NodeClaim) time.Time {
	if c := meta.FindStatusCondition(claim.Status.Conditions, stevedorev1.ConditionLaunched); c != nil {
		return c.LastTransitionTime.Time
	}
	return claim.CreationTimestamp.Time
}

// nodeOf returns the Node of a NodeClaim (by provider ID, else by name), or nil.
func (l *Lifecycle) nodeOf(claim *stevedorev1.NodeClaim) *corev1.Node {
	if claim.Status.NodeName != "" {
		if n, err := l.prov.opts.Nodes.Get(claim.Status.NodeName); err == nil && (claim.Status.ProviderID == "" || n.Spec.ProviderID == claim.Status.ProviderID) {
			return n
		}
	}
	if claim.Status.ProviderID == "" {
		return nil
	}
	nodes, _ := l.prov.opts.Nodes.List(labels.Everything())
	for _, n := range nodes {
		if n.Spec.ProviderID == claim.Status.ProviderID {
			return n
		}
	}
	return nil
}

// syncNode gives a registered Node its NodeClaim's labels (and the well-known labels of the launched type), the
// termination finalizer and the NodeClaim as owner, and removes the unregistered taint.
func (l *Lifecycle) syncNode(ctx context.Context, claim *stevedorev1.NodeClaim, node *corev1.Node) error {
	its := l.prov.knownTypes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.prov.opts.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range ClaimNodeLabels(claim, its[claim.Status.InstanceType], l.prov.opts.Region) {
			cur.Labels[k] = v
		}
		cur.Labels[stevedorev1.LabelNodeClaim] = claim.Name
		if !hasFinalizer(cur.Finalizers, stevedorev1.TerminationFinalizer) {
			cur.Finalizers = append(cur.Finalizers, stevedorev1.TerminationFinalizer)
		}
		owned := false
		for _, o := range cur.OwnerReferences {
			owned = owned || o.UID == claim.UID
		}
		if !owned {
			cur.OwnerReferences = append(cur.OwnerReferences, metav1.OwnerReference{APIVersion: stevedorev1.SchemeGroupVersion.String(),
				Kind: "NodeClaim", Name: claim.Name, UID: claim.UID, BlockOwnerDeletion: ptr.To(true)})
		}
		var taints []corev1.Taint
		for _, t := range cur.Spec.Taints {
			if t.Key != stevedorev1.TaintUnregistered {
				taints = append(taints, t)
			}
		}
		for _, t := range claim.Spec.Taints {
			if !hasTaint(taints, t) {
				taints = append(taints, t)
			}
		}
		cur.Spec.Taints = taints
		_, err = l.prov.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// initialize marks a NodeClaim initialized once its node is Ready with no startup or readiness taint left.
func (l *Lifecycle) initialize(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	node := l.nodeOf(claim)
	if node == nil {
		return 10 * time.Second, nil
	}
	if why := notInitialized(claim, node); why != "" {
		return 0, nil // node events bring it back
	}
	changed, err := l.setConditions(ctx, claim.Name,
		metav1.Condition{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", Message: "node is ready"},
		metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "node is ready"})
	if err != nil {
		return 0, err
	}
	if node.Labels[stevedorev1.LabelInitialized] != "true" {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, stevedorev1.LabelInitialized))
		if _, err := l.prov.opts.Kube.CoreV1().Nodes().Patch(ctx, node.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			return 0, err
		}
	}
	if changed {
		klog.FromContext(ctx).Info("Initialized node", "node", node.Name, "readyAfter", l.prov.opts.Clock.Since(claim.CreationTimestamp.Time).Round(time.Millisecond))
		l.prov.claimEvent(claim, corev1.EventTypeNormal, ReasonInitialized, "Initialize", "node %s is ready", node.Name)
	}
	if l.opts.OnInitialized != nil {
		l.opts.OnInitialized(node.Name)
	}
	return 0, nil
}

// notInitialized says why a node is not ready for pods yet ("" when it is).
func notInitialized(claim *stevedorev1.NodeClaim, node *corev1.Node) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", stevedorev1.TaintUnregistered:
			return "node has taint " + t.Key
		}
		for _, st := range claim.Spec.StartupTaints {
			if st.Key == t.Key && st.Effect == t.Effect {
				return "startup taint " + t.Key + " is still on the node"
			}
		}
	}
	return ""
}

// IsNodeInitializing reports whether a node belongs to a NodeClaim that is registered but not yet initialized.
func (p *Provisioner) IsNodeInitializing(nodeName string) bool {
	node, err := p.opts.Nodes.Get(nodeName)
	if err != nil {
		return false
	}
	name := node.Labels[stevedorev1.LabelNodeClaim]
	if name == "" {
		return false
	}
	claim, err := p.opts.NodeClaims.Get(name)
	if err != nil {
		return false
	}
	return conditionTrue(claim.Status.Conditions, stevedorev1.ConditionRegistered) && !IsInitialized(claim)
}

func (l *Lifecycle) setCondition(ctx context.Context, name, condType string, status metav1.ConditionStatus, reason, message string) error {
	_, err := l.setConditions(ctx, name, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	return err
}

// setConditions sets conditions on a NodeClaim's status in one update; it reports whether any changed.
func (l *Lifecycle) setConditions(ctx context.Context, name string, conds ...metav1.Condition) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client(l.prov).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed = false
		for _, c := range conds {
			c.Message = truncate(c.Message, 1000)
			c.ObservedGeneration = cur.Generation
			changed = meta.SetStatusCondition(&cur.Status.Conditions, c) || changed
		}
		if !changed {
			return nil
		}
		_, err = client(l.prov).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
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

func (p *Provisioner) claimEvent(claim *stevedorev1.NodeClaim, eventType, reason, action, note string, args ...any) {
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...)
}

func hasFinalizer(list []string, f string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func hasTaint(list []corev1.Taint, t corev1.Taint) bool {
	for _, x := range list {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

// tolerates reports whether a pod tolerates every NoSchedule/NoExecute taint.
func tolerates(pod *corev1.Pod, taints []corev1.Taint) bool {
	return solver.ToleratesAll(pod, taints, func(e corev1.TaintEffect) bool { return e != corev1.TaintEffectPreferNoSchedule })
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// cloudErrorCode is the cloud API's error code in err (RequestLimitExceeded, InternalError, ...), or CloudError
// when the call got no coded answer (a timeout, a refused connection).
func cloudErrorCode(err error) string {
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() != "" {
		return coded.ErrorCode()
	}
	return "CloudError"
}
