/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"

// The names of disruption's methods, the reasons it records on NodeClaims, and the reasons of its events: every
// word a user reads in a log line, an event, a condition or a metric label comes from here.

// Disruption methods, in the order a pass tries them.
const (
	MethodExpiration = "expiration"
	MethodEmptiness  = "emptiness"
	MethodDrift      = "drift"
	MethodMultiNode  = "multi-node-consolidation"
	MethodSingleNode = "single-node-consolidation"
	// MethodInterruption is not a pass's method: the interruption controller asks for it (Controller.Interrupt).
	MethodInterruption = "interruption"
)

// MethodRepair replaces nodes that stay unhealthy (a pass's first method when repair is on).
const MethodRepair = "repair"

// Disruption reasons of the forceful methods, beside the budget reasons of stevedorev1 (Empty, Underutilized,
// Drifted): none of them is budgeted.
const (
	// ReasonExpired is the disruption reason of expiry.
	ReasonExpired stevedorev1.DisruptionReason = "Expired"
	// ReasonUnhealthy is the disruption reason of repair (bounded by RepairOptions.MaxUnhealthyPercent instead).
	ReasonUnhealthy stevedorev1.DisruptionReason = "Unhealthy"
)

// Event reasons of disruption.
const (
	ReasonDisrupting        = "Disrupting"
	ReasonDisruptionFailed  = "DisruptionFailed"
	ReasonDisruptionBlocked = "DisruptionBlocked"
	// ReasonSurged: pods of the node moved make-before-break (their successors were Ready before they went).
	ReasonSurged = "Surged"
	// ReasonSurgeFailed: pods of the node did not surge and are evicted instead.
	ReasonSurgeFailed = "SurgeFailed"
	// ReasonSurgeSkippedForGitOps, on a Deployment or ReplicaSet: its pods on a disrupted node are evicted, not
	// surged, because a GitOps controller owns its spec.replicas and would undo the surge.
	ReasonSurgeSkippedForGitOps = "SurgeSkippedForGitOps"
)

// Event reasons of repair.
const (
	ReasonNodeRebooted      = "NodeRebooted"
	ReasonNodeRepairBlocked = "NodeRepairBlocked"
)

// RetainReason says why voluntary disruption left a node: the reason of the NodeClaim's Consolidatable=False
// condition and of the event that goes with it.
type RetainReason string

// Reasons voluntary disruption leaves a node.
const (
	// RetainDoNotDisrupt: the node or one of its pods is annotated do-not-disrupt.
	RetainDoNotDisrupt RetainReason = "DoNotDisrupt"
	// RetainPodDisruptionBudget: a PodDisruptionBudget refuses the eviction of one of its pods.
	RetainPodDisruptionBudget RetainReason = "PodDisruptionBudget"
	// RetainGang: one of its pods runs in a gang (a coscheduling PodGroup): moving it would stop the whole gang.
	RetainGang RetainReason = "Gang"
	// RetainBooked: the node was launched for a ProvisioningRequest whose booking holds (its pods have not all
	// come yet).
	RetainBooked RetainReason = "ProvisioningRequestBooked"
	// RetainNominated: pending pods are nominated to the node (passing; not reported).
	RetainNominated RetainReason = "Nominated"
	// RetainSurging: a pod of the node waits for a surge under way that moves a sibling of it (passing; not
	// reported).
	RetainSurging RetainReason = "Surging"
	// RetainJustLaunched: the node was just launched as a replacement (passing; not reported).
	RetainJustLaunched RetainReason = "JustLaunched"
	// RetainWhenEmpty: the NodePool's consolidationPolicy is WhenEmpty and the node runs pods.
	RetainWhenEmpty RetainReason = "WhenEmptyPolicy"
	// RetainConsolidationOff: the NodePool's consolidateAfter is Never.
	RetainConsolidationOff RetainReason = "ConsolidationDisabled"
	// RetainConsolidateAfter: pods arrived on or left the node within consolidateAfter (the dry run reports it;
	// the live loop does not, as it changes with every pod).
	RetainConsolidateAfter RetainReason = "ConsolidateAfter"
	// RetainBudget: the NodePool's disruption budget allows no more disruptions for the reason now.
	RetainBudget RetainReason = "DisruptionBudget"
	// RetainPodsFitNowhere: one of its pods fits on no other node and on no node the NodePools can launch.
	RetainPodsFitNowhere RetainReason = "PodsFitNowhere"
	// RetainNeedsSeveralNodes: its pods need more than one new node (consolidation replaces by at most one).
	RetainNeedsSeveralNodes RetainReason = "NeedsSeveralNodes"
	// RetainNotCheaper: its pods fit only on a new node that costs as much as the node or more.
	RetainNotCheaper RetainReason = "NotCheaper"
	// RetainSpotToSpot: the only cheaper replacement is spot, and spot-to-spot consolidation is off or has too
	// few cheaper types to choose from.
	RetainSpotToSpot RetainReason = "SpotToSpot"
	// RetainBalancedScore: under the Balanced policy, the move's saving does not outweigh its disruption.
	RetainBalancedScore RetainReason = "BalancedScore"
	// RetainOtherMove: the pass takes another move that saves as much or more for no costlier a disruption
	// (passing; not reported).
	RetainOtherMove RetainReason = "OtherMoveFirst"
	// RetainStatic: the node belongs to a static NodePool, whose nodes are replaced, never consolidated (passing;
	// not reported).
	RetainStatic RetainReason = "StaticNodePool"
	// RetainRecentlyFailed: the node's last consolidation was abandoned at validation or failed; it waits before
	// it is tried again (the wait doubles with each failure, up to 10 minutes), so that other nodes get their turn.
	RetainRecentlyFailed RetainReason = "RecentlyFailed"
	// RetainWarmCapacity: the empty node keeps room for warm capacity or for pods waiting for a place.
	RetainWarmCapacity RetainReason = "WarmCapacity"
)

// Event reasons of the verdicts: DisruptionBlocked for what blocks every voluntary disruption (do-not-disrupt,
// a PodDisruptionBudget), Unconsolidatable for the rest (Karpenter's name for the same event).
const (
	ReasonUnconsolidatable = "Unconsolidatable"
)
