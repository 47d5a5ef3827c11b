/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
)

// initializationRecheck is how often a registered NodeClaim whose node the cache lost is looked at again.
const initializationRecheck = 10 * time.Second

// initialize marks a NodeClaim initialized once its node is Ready with no startup or readiness taint left.
func (l *Lifecycle) initialize(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	node := nodeclaim.NodeOf(l.opts.Nodes, claim)
	if node == nil {
		return initializationRecheck, nil
	}
	if why := notInitialized(claim, node); why != "" {
		return 0, nil // node events bring it back
	}
	changed, err := l.setConditions(ctx, claim.Name, initializedConditions()...)
	if err != nil {
		return 0, err
	}
	if node.Labels[stevedorev1.LabelInitialized] != "true" {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, stevedorev1.LabelInitialized))
		if _, err := l.opts.Kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return 0, err
		}
	}
	l.initialized(ctx, claim, node, changed)
	return 0, nil
}

// initializedConditions are the conditions of a NodeClaim whose node is ready for pods.
func initializedConditions() []metav1.Condition {
	return []metav1.Condition{
		{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", Message: "node is ready"},
		{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: "node is ready"},
	}
}

// initialized says a NodeClaim's node is ready for pods (logged when its conditions just changed; the Initialized
// condition records when, as Registered does for the registration: the NodeClaim's one event is Launched), lets the
// pods held in Permit for it bind and tells provisioning, which wakes the pods planned there.
func (l *Lifecycle) initialized(ctx context.Context, claim *stevedorev1.NodeClaim, node *corev1.Node, changed bool) {
	if changed {
		klog.FromContext(ctx).Info("Initialized node", "node", node.Name, "readyAfter", l.opts.Clock.Since(claim.CreationTimestamp.Time).Round(time.Millisecond))
	}
	if l.opts.OnInitialized != nil {
		l.opts.OnInitialized(node.Name)
	}
	l.opts.Provisioning.ClaimInitialized(ctx, claim.Name)
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
