/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	informers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Condition types of an EC2NodeClass.
const (
	ConditionSubnetsReady        = "SubnetsReady"
	ConditionSecurityGroupsReady = "SecurityGroupsReady"
	ConditionAMIsReady           = "AMIsReady"
	// ConditionInstanceProfileReady says whether the instance profile exists and holds a role (for a role, the
	// one Stevedore created for it).
	ConditionInstanceProfileReady = "InstanceProfileReady"
	// ConditionPlacementGroupReady says whether placementGroupSelector selects one available placement group (only
	// with a selector).
	ConditionPlacementGroupReady = "PlacementGroupReady"
	// ConditionInstanceCatalogReady says whether the instance types and prices in use are the region's, read
	// from AWS by the last read (every EC2NodeClass shows it: the catalog serves them all).
	ConditionInstanceCatalogReady = "InstanceCatalogReady"
	// ConditionKubernetesVersionReady, on a node class whose AMIs an alias selects, says which Kubernetes
	// version's images they are and whether the API server's version was read last time it was asked.
	ConditionKubernetesVersionReady = "KubernetesVersionReady"
)

// maxResolveBackoff caps the wait before a node class that failed to resolve is tried again.
const maxResolveBackoff = 5 * time.Minute

// errNotResolved makes the queue back off a node class whose resolution failed (its status already says why).
var errNotResolved = fmt.Errorf("the EC2NodeClass did not resolve: %w", reconcile.ErrWaiting)

// errClaimsRemain makes the queue come back to a deleted node class whose NodeClaims are not gone yet.
var errClaimsRemain = fmt.Errorf("NodeClaims of the EC2NodeClass remain: %w", reconcile.ErrWaiting)

// NodeClassStatus writes what each EC2NodeClass resolves to into its status, with a Ready condition whose reason
// says what did not resolve. For a node class that names a role it keeps the stevedore.dev/termination finalizer,
// so that the instance profile Stevedore created for it is deleted once the node class is deleted and its last
// NodeClaim is gone. It resolves on every change of the spec and every minute (subnets fill up, AMIs are
// released); a resolution that failed is retried after 30 s, doubling up to five minutes. The status carries
// nothing that changes from call to call (no AWS request ID), so an unchanged failure writes nothing.
type NodeClassStatus struct {
	provider *Provider
	client   versioned.Interface
	informer informers.EC2NodeClassInformer
	claims   listers.NodeClaimLister
	recorder events.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
}

// NewNodeClassStatus returns the controller.
// Recorder gets an event on each EC2NodeClass when the instance catalog stops or starts being read from AWS.
func NewNodeClassStatus(p *Provider, client versioned.Interface, informer informers.EC2NodeClassInformer, claims informers.NodeClaimInformer,
	recorder events.EventRecorder) *NodeClassStatus {
	c := &NodeClassStatus{provider: p, client: client, informer: informer, claims: claims.Lister(), recorder: recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](failureTTL, maxResolveBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ec2nodeclass-status"})}
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueue(obj) },
		// only a change of the spec, the finalizers or the deletion: the controller's own status writes must not
		// wake it
		UpdateFunc: func(old, obj any) {
			o, n := old.(*stevedorev1.EC2NodeClass), obj.(*stevedorev1.EC2NodeClass)
			if o.Generation != n.Generation || !slices.Equal(o.Finalizers, n.Finalizers) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				c.enqueue(obj)
			}
		},
	})
	// a deleted node class waits for its last NodeClaim
	_, _ = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if claim, ok := reconcile.Deleted[*stevedorev1.NodeClaim](obj); ok && claim.Spec.NodeClassRef != nil {
			if nc, err := c.informer.Lister().Get(claim.Spec.NodeClassRef.Name); err == nil && nc.DeletionTimestamp != nil {
				c.queue.Add(nc.Name)
			}
		}
	}})
	return c
}

func (c *NodeClassStatus) enqueue(obj any) {
	if nc, ok := obj.(*stevedorev1.EC2NodeClass); ok {
		c.queue.Add(nc.Name)
	}
}

// Run reconciles until ctx ends.
func (c *NodeClassStatus) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		reconcile.Process(ctx, c.queue, "EC2NodeClass", reconcile.Errors(c.reconcile))
	}, time.Second)
	wait.UntilWithContext(ctx, func(context.Context) {
		ncs, _ := c.informer.Lister().List(labels.Everything())
		for _, nc := range ncs {
			c.queue.Add(nc.Name)
		}
	}, time.Minute)
}

func (c *NodeClassStatus) reconcile(ctx context.Context, name string) error {
	nc, err := c.informer.Lister().Get(name)
	if err != nil {
		return nil
	}
	if nc.DeletionTimestamp != nil {
		return c.finalize(ctx, nc)
	}
	if nc.Spec.Role != "" && !stevedorev1.HasTerminationFinalizer(nc.Finalizers) {
		// the update wakes the controller again, to resolve with the finalizer in place
		return c.setFinalizer(ctx, name, true)
	}
	res, resolveErr := c.provider.Resolve(ctx, nc)
	c.provider.Catalog(ctx)
	var catalog catalogState
	catalog.known, catalog.ok, catalog.reason, catalog.message = c.provider.CatalogCondition()
	var version versionState
	if usesAlias(nc) {
		version.applies = true
		version.ok, version.reason, version.message = c.provider.KubernetesVersionCondition()
	}
	now := c.provider.opts.Clock.Now()
	written, catalogChanged, err := c.writeStatus(ctx, name, res, resolveErr, catalog, version, now)
	if err == nil && written != nil && catalogChanged && c.recorder != nil {
		typ := corev1.EventTypeWarning
		if catalog.ok {
			typ = corev1.EventTypeNormal
		}
		c.recorder.Eventf(written, nil, typ, "InstanceCatalog"+catalog.reason, "ReadInstanceCatalog", "%s", catalog.message)
	}
	if err == nil && (resolveErr != nil || (res != nil && len(res.Problems) > 0)) {
		return errNotResolved
	}
	return err
}

// writeStatus writes a node class's status from its resolution (or the error resolving it) and the catalog's
// condition; it returns the node class written (nil when nothing changed) and whether the catalog's condition
// changed.
func (c *NodeClassStatus) writeStatus(ctx context.Context, name string, res *Resolved, resolveErr error, catalog catalogState,
	version versionState, now time.Time) (*stevedorev1.EC2NodeClass, bool, error) {
	var written *stevedorev1.EC2NodeClass
	var catalogChanged bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.StevedoreV1().EC2NodeClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status := cur.Status.DeepCopy()
		conds := conditions{status: status, generation: cur.Generation}
		catalogChanged = catalog.known && catalog.changes(status)
		if catalog.known {
			conds.set(ConditionInstanceCatalogReady, catalog.ok, catalog.reason, catalog.message)
		}
		if version.applies {
			conds.set(ConditionKubernetesVersionReady, version.ok, version.reason, version.message)
		} else {
			meta.RemoveStatusCondition(&status.Conditions, ConditionKubernetesVersionReady)
		}
		if resolveErr != nil {
			conds.set(stevedorev1.ConditionReady, false, "ResolutionFailed", StableMessage(resolveErr))
		} else {
			writeResolution(conds, res, catalog, now)
			writePlacementGroup(conds, cur.Spec.PlacementGroupSelector != nil, res.PlacementGroup)
		}
		if equalStatus(&cur.Status, status) {
			return nil
		}
		cur.Status = *status
		written, err = c.client.StevedoreV1().EC2NodeClasses().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return written, catalogChanged, err
}

// catalogState is the instance-type catalog's condition as the provider reports it (known false before its first
// read).
type catalogState struct {
	known, ok       bool
	reason, message string
}

// versionState is the condition of the Kubernetes version the AMIs are for, on a node class it applies to (one
// whose AMIs an alias selects).
type versionState struct {
	applies, ok     bool
	reason, message string
}

// usesAlias reports whether a node class's AMIs come from an alias (the default when it selects none).
func usesAlias(nc *stevedorev1.EC2NodeClass) bool {
	if len(nc.Spec.AMISelectorTerms) == 0 {
		return true
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			return true
		}
	}
	return false
}

// changes reports whether the catalog's condition in status differs in reason or truth from this state (an event
// is recorded when it does).
func (c catalogState) changes(status *stevedorev1.EC2NodeClassStatus) bool {
	prev := meta.FindStatusCondition(status.Conditions, ConditionInstanceCatalogReady)
	if prev == nil {
		return !c.ok
	}
	return prev.Reason != c.reason || (prev.Status == metav1.ConditionTrue) != c.ok
}

// conditions sets conditions on a node class's status at its generation.
type conditions struct {
	status     *stevedorev1.EC2NodeClassStatus
	generation int64
}

func (c conditions) set(condType string, ok bool, reason, message string) {
	s := metav1.ConditionTrue
	if !ok {
		s = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&c.status.Conditions, metav1.Condition{Type: condType, Status: s, Reason: reason, Message: message, ObservedGeneration: c.generation})
}

// writeResolution writes what a node class resolved to into its status: subnets, security groups, AMIs, instance
// profile and reservations, a condition for each, and Ready.
func writeResolution(conds conditions, res *Resolved, catalog catalogState, now time.Time) {
	status := conds.status
	status.Subnets, status.SecurityGroups, status.AMIs = nil, nil, nil
	for _, s := range res.Subnets {
		status.Subnets = append(status.Subnets, stevedorev1.SubnetStatus{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	for _, id := range res.SecurityGroupIDs {
		status.SecurityGroups = append(status.SecurityGroups, stevedorev1.SecurityGroupStatus{ID: id})
	}
	for _, key := range sortedKeysOf(res.AMIs) {
		ami := res.AMIs[key]
		arch, variant, _ := strings.Cut(key, "/")
		status.AMIs = append(status.AMIs, stevedorev1.AMIStatus{ID: ami.ID, Name: ami.Name, Deprecated: ami.Deprecated,
			Requirements: imageRequirements(arch, variant, ami.FromAlias)})
	}
	status.InstanceProfile = res.InstanceProfile
	if res.InstanceProfileProblem != "" {
		conds.set(ConditionInstanceProfileReady, false, "InstanceProfileNotReady", res.InstanceProfileProblem)
	} else {
		conds.set(ConditionInstanceProfileReady, true, "InstanceProfileReady", "instance profile "+res.InstanceProfile)
	}
	status.CapacityReservations = reservationStatus(res.Reservations, now)
	conds.set(ConditionSubnetsReady, len(res.Subnets) > 0, reasonFor(len(res.Subnets) > 0, "SubnetsFound", "NoSubnetMatches"), countMessage(len(res.Subnets), "subnet"))
	conds.set(ConditionSecurityGroupsReady, len(res.SecurityGroupIDs) > 0, reasonFor(len(res.SecurityGroupIDs) > 0, "SecurityGroupsFound", "NoSecurityGroupMatches"), countMessage(len(res.SecurityGroupIDs), "security group"))
	conds.set(ConditionAMIsReady, len(res.AMIs) > 0, reasonFor(len(res.AMIs) > 0, "AMIsFound", "NoAMIMatches"), countMessage(len(res.AMIs), "AMI"))
	switch {
	case catalog.known && catalog.reason == "NoCatalog":
		conds.set(stevedorev1.ConditionReady, false, "NoCatalog", catalog.message)
	case len(res.Problems) == 0:
		conds.set(stevedorev1.ConditionReady, true, "Ready", "subnets, security groups, AMIs and instance profile resolved")
	default:
		conds.set(stevedorev1.ConditionReady, false, "NotResolved", strings.Join(res.Problems, "; "))
	}
}

// writePlacementGroup writes the placement group a node class's selector resolved to, and PlacementGroupReady;
// without a selector, neither.
func writePlacementGroup(conds conditions, selected bool, pg *PlacementGroup) {
	conds.status.PlacementGroup = nil
	switch {
	case !selected:
		meta.RemoveStatusCondition(&conds.status.Conditions, ConditionPlacementGroupReady)
	case pg == nil:
		conds.set(ConditionPlacementGroupReady, false, "NoPlacementGroupMatches", "placementGroupSelector selects no single available placement group")
	default:
		conds.status.PlacementGroup = &stevedorev1.PlacementGroupStatus{ID: pg.ID, Name: pg.Name, Strategy: pg.Strategy, PartitionCount: pg.Partitions}
		conds.set(ConditionPlacementGroupReady, true, "PlacementGroupFound", fmt.Sprintf("placement group %s (%s, %s)", pg.Name, pg.ID, pg.Strategy))
	}
}

// finalize deletes the managed instance profile of a deleted node class once none of its NodeClaims remain, then
// lets the node class go.
func (c *NodeClassStatus) finalize(ctx context.Context, nc *stevedorev1.EC2NodeClass) error {
	if !stevedorev1.HasTerminationFinalizer(nc.Finalizers) {
		return nil
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, claim := range claims {
		if claim.Spec.NodeClassRef != nil && claim.Spec.NodeClassRef.Name == nc.Name {
			return errClaimsRemain
		}
	}
	if err := c.provider.discovery.profiles.remove(ctx, nc.Name); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("EC2NodeClass deleted; its instance profile is gone", "ec2nodeclass", nc.Name)
	return c.setFinalizer(ctx, nc.Name, false)
}

// setFinalizer adds or removes the termination finalizer of a node class.
func (c *NodeClassStatus) setFinalizer(ctx context.Context, name string, want bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.StevedoreV1().EC2NodeClasses().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if stevedorev1.HasTerminationFinalizer(cur.Finalizers) == want {
			return nil
		}
		if want {
			cur.Finalizers = append(cur.Finalizers, stevedorev1.TerminationFinalizer)
		} else {
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == stevedorev1.TerminationFinalizer })
		}
		_, err = c.client.StevedoreV1().EC2NodeClasses().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// imageRequirements say which types an AMI serves, as Karpenter states them: its architecture, and for an alias's
// images the variant (GPU types for nvidia, Neuron types for neuron, neither for the standard image).
func imageRequirements(arch, variant string, fromAlias bool) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
	switch {
	case variant == "nvidia":
		out = append(out, corev1.NodeSelectorRequirement{Key: stevedorev1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists})
	case variant == "neuron":
		out = append(out, corev1.NodeSelectorRequirement{Key: stevedorev1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists})
	case fromAlias:
		out = append(out, corev1.NodeSelectorRequirement{Key: stevedorev1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			corev1.NodeSelectorRequirement{Key: stevedorev1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	}
	return out
}

func reasonFor(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func countMessage(n int, what string) string {
	if n == 1 {
		return "1 " + what + " resolved"
	}
	return strconv.Itoa(n) + " " + what + "s resolved"
}

func equalStatus(a, b *stevedorev1.EC2NodeClassStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// reservationStatus is the node class's resolved reservations as its status shows them.
func reservationStatus(reservations []Reservation, now time.Time) []stevedorev1.CapacityReservationStatus {
	var out []stevedorev1.CapacityReservationStatus
	for _, r := range reservations {
		st := stevedorev1.CapacityReservationStatus{ID: r.ID, OwnerID: r.OwnerID, InstanceType: r.InstanceType, AvailabilityZone: r.Zone,
			ReservationType: r.Type, InstanceMatchCriteria: r.MatchCriteria, TotalInstances: r.Total, AvailableInstances: r.Available, State: "active",
			Interruptible: r.Interruptible}
		if !r.End.IsZero() {
			st.EndTime = &metav1.Time{Time: r.End}
		}
		if r.Expiring(now) {
			st.State = "expiring"
		}
		out = append(out, st)
	}
	return out
}
