/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
)

// register finds the Node of a launched NodeClaim and syncs it; until the node is there, liveness decides how
// long to wait. A node that is ready for pods already when it registers (Ready, no taint left that initialization
// waits for) is initialized in the same step: one update of the node and one of the NodeClaim's status, not two
// of each.
func (l *Lifecycle) register(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	node := nodeclaim.NodeOf(l.opts.Nodes, claim)
	if node == nil {
		return l.awaitRegistration(ctx, claim)
	}
	// before syncNode lets pods in: the scheduler keeps the DaemonSet pods' room until they are bound
	l.opts.Provisioning.ExpectDaemons(node.Name, l.opts.Provisioning.DaemonSetPods(ctx, claim))
	synced, err := l.syncNode(ctx, claim, node)
	if err != nil {
		return 0, err
	}
	ready := notInitialized(claim, synced) == ""
	conds := []metav1.Condition{{Type: stevedorev1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered",
		Message: "node " + node.Name + " registered"}}
	if ready {
		conds = append(conds, initializedConditions()...)
	}
	changed, err := l.setConditions(ctx, claim.Name, conds...)
	if err != nil || !changed {
		return 0, err
	}
	pool := claim.Labels[stevedorev1.LabelNodePool]
	klog.FromContext(ctx).Info("Registered node", "node", node.Name, "instance", claim.Status.InstanceID, "nodepool", pool,
		"type", claim.Status.InstanceType, "zone", claim.Status.Zone, "capacityType", claim.Status.CapacityType, "price", claim.Status.Price,
		"ready", ready)
	metrics.NodesCreated.WithLabelValues(pool, claim.Status.Zone, claim.Status.CapacityType, claim.Status.InstanceType).Inc()
	if ready {
		l.initialized(ctx, claim, synced, true)
	}
	return 0, nil
}

// syncNode gives a registered Node its NodeClaim's labels (and the well-known labels of the launched type), the
// termination finalizer and the NodeClaim as owner, and removes the unregistered taint; a node that is then ready
// for pods is labelled initialized too. It starts from the cache's copy (a conflict reads the node again) and
// returns the node as written.
func (l *Lifecycle) syncNode(ctx context.Context, claim *stevedorev1.NodeClaim, node *corev1.Node) (*corev1.Node, error) {
	its := l.opts.Provisioning.InstanceTypesOf(ctx, claim)
	var written *corev1.Node
	cur := node.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			got, err := l.opts.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range nodeclaim.NodeLabels(claim, its[claim.Status.InstanceType], l.opts.Args.Region) {
			cur.Labels[k] = v
		}
		cur.Labels[stevedorev1.LabelNodeClaim] = claim.Name
		if !stevedorev1.HasTerminationFinalizer(cur.Finalizers) {
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
		cur.Spec.Taints = registeredTaints(cur.Spec.Taints, claim.Spec.Taints)
		if notInitialized(claim, cur) == "" {
			cur.Labels[stevedorev1.LabelInitialized] = "true"
		}
		var err error
		written, err = l.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			cur = nil // read it again
		}
		return err
	})
	return written, err
}

// registeredTaints are a registered node's taints: its own without the unregistered taint, and the NodeClaim's
// it does not have yet.
func registeredTaints(node, claim []corev1.Taint) []corev1.Taint {
	var taints []corev1.Taint
	for _, t := range node {
		if t.Key != stevedorev1.TaintUnregistered {
			taints = append(taints, t)
		}
	}
	for _, t := range claim {
		if !hasTaint(taints, t) {
			taints = append(taints, t)
		}
	}
	return taints
}

func hasTaint(list []corev1.Taint, t corev1.Taint) bool {
	for _, x := range list {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}
