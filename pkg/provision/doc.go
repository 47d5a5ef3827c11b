/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package provision turns the solver's plans into nodes and keeps them: the provisioner batches the pods no node
// fits (PostFilter), solves each batch (package solver) and creates one NodeClaim per planned node, nominating each
// pod to the node coming up for it (nominate.go) and keeping the room of planned pods until they bind
// (noderoom.go). What is planned where is kept by one ledger (package ledger), which follows the deletions of
// NodeClaims and pods itself. The NodeClaim lifecycle (pkg/nodeclaim/lifecycle) launches the instance, registers and
// initializes its node and asks the provisioner for the pods planned on it; deleted NodeClaims go to the
// terminator (pkg/nodeclaim/termination). cluster.go answers disruption's "what if these nodes went away".
//
// # Pods held back, and what wakes them
//
// The scheduler parks a pod it could not place in its unschedulable pool and retries it only when a cluster event
// one of the rejecting plugins registered for may help (its queueing hint says Queue), or at its periodic flush
// (five minutes). Every reason the Provisioner plugin holds a pod back for Stevedore's own state therefore comes
// with the change that clears it and how the pod is put back in the active queue: a queueing hint on a cluster
// event the queue sees, or SchedulingQueue.Activate from the place where the state changes (wakeup.go; the
// stevedore_pods_woken_total counter, by reason). wakeup_test.go drives the real scheduling queue through each
// row; hints_test.go in the plugin's package drives its queueing hints.
//
//	where        | the pod is held because                         | cleared by                                  | woken by
//	-------------+-------------------------------------------------+---------------------------------------------+------------------------------------------
//	Filter       | room on the node is kept for pods planned there | a planned pod there binds                   | Activate, PlannedPodBound (PostBind)
//	             | and not bound yet (RoomRefused)                 | a planned pod there is deleted              | Activate, PlannedPodGone (pod informer)
//	             |                                                 | a planned pod there is planned elsewhere    | Activate, PlannedPodGone (ledger.Plan)
//	             |                                                 | a planned pod there finds no room and is    | Activate, PlannedPodGone (Consider)
//	             |                                                 |   planned again                             |
//	Filter,      | the pod is planned on another NodeClaim, whose  | its node registers, loses a taint, is       | hint on Node Add/UpdateNodeTaint/
//	PreFilter    | node is still coming                            |   labelled initialized                      |   UpdateNodeLabel of a Stevedore node
//	             |                                                 | its NodeClaim goes (launch failed, deleted, | Activate, PlanDropped (the ledger sees it go)
//	             |                                                 |   never registered)                         |
//	             |                                                 | the launched type cannot hold it            | Activate, PlanDropped (Replan)
//	PreFilter    | the pod is planned nowhere and the only nodes   | a node initializes                          | hint on UpdateNodeLabel of a Stevedore node
//	             | left are initializing for others                | the pod is planned on one of them           | Activate, PlannedOnExistingNode (nominate)
//	Filter (the  | the room of the pods nominated to the node      | a pod nominated there binds or is deleted   | Activate, PlannedPodBound/PlannedPodGone
//	scheduler's  | (the scheduler adds them itself)                |                                             |
//	NodeResourcesFit)                                              |                                             |
//	PostFilter   | batched: waiting for the solve                  | planned on a node that exists already       | Activate, PlannedOnExistingNode (nominate)
//	             |                                                 | planned on a new node                       | hint on Node Add of that node
//	             |                                                 | the solve failed                            | pending-pod sweep batches it again
//	PostFilter   | waiting for its NodeClaim to launch             | the launch names the node, the Node         | hint on Node Add of a Stevedore node
//	             |                                                 |   registers                                 |
//	PostFilter   | nominated to a node not registered yet          | the node registers, is untainted            | hint on Node Add/UpdateNodeTaint
//	             |                                                 | the node finishes initializing              | Activate, NodeInitialized; hint on
//	             |                                                 |                                             |   UpdateNodeLabel
//	PostFilter   | no NodePool can launch a node for it (cached a  | a NodePool is added or changed, a NodeClaim | Activate, NodePoolsChanged
//	             | minute; preemption runs)                        |   goes away (limits)                        |
//	Filter       | Stevedore is starting: the node is coming up    | the provisioner adopts the plan the pods'   | Activate, Started (AdoptNominations)
//	             | and the pods planned on it are not known yet    |   nominations record                        |
//	any (planned | its planned node has been ready for replanAfter | (a backstop: a wake-up this table missed;    | Activate, Parked (pending-pod sweep)
//	on a ready   | and it is still not bound                       |   a pod waiting its turn is left there)     |
//	node)        | ... and refused it replanAfter after its first  | (the plan no longer holds: its room or its  | Activate, StalePlan: planned again
//	             |   refusal, and after replanAfter on the node    |   spread taken by pods put there instead)   |
//	Permit       | its node is initializing (Wait)                 | the node initializes                        | WaitingPod.Allow (not a queue: the pod
//	             |                                                 |                                             |   is in its binding cycle)
//	any          | a bound pod on a Stevedore node held its room   | that pod is deleted                         | hint on AssignedPod Delete
//
// The wake-ups of a node's plan changing go only to the pods that node refused in their last attempt (refusedOn),
// so a burst does not retry every pod planned on a node each time one of them binds. Events that cannot help
// (another node registering, a pod planned elsewhere binding, a node of another provisioner changing) leave the
// pod parked: the hints answer QueueSkip and nothing calls Activate. The node hints ask NodeMayHelp: a pod planned
// on a NodeClaim is requeued by that NodeClaim's node only (by any node of Stevedore's while the NodeClaim has none).
// Once a pod's planned node has initialized, the queue sort (NodeReadyFor) puts it before the pods of its priority
// not tried yet.
package provision
