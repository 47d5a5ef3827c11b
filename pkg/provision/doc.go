/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package provision turns the solver's plans into nodes and keeps them: the provisioner batches the pods no node
// has room for as they enter the scheduling queue (admit.go; package freeroom screens the nodes), and those that fail
// a scheduling cycle (PostFilter), solves each batch (package solver) and creates one NodeClaim per planned node,
// holds each pod until the node coming up for it is ready (admit.go, nominate.go) and keeps the room of planned pods
// until they bind (noderoom.go). What is planned where is kept by one ledger (package ledger), which follows the deletions of
// NodeClaims and pods itself. The NodeClaim lifecycle (pkg/nodeclaim/lifecycle) launches the instance, registers and
// initializes its node and asks the provisioner for the pods planned on it; deleted NodeClaims go to the
// terminator (pkg/nodeclaim/termination). cluster.go answers disruption's "what if these nodes went away".
//
// # Pods held back, and what wakes them
//
// A pod of this scheduler is first looked at as it enters the scheduling queue (Admit, the plugin's PreEnqueue):
// one some node may take goes to a scheduling cycle; one no node has room for is batched at once and waits before
// the queue, as does a pod planned on a node that is not ready yet, with nothing written on it. The queue keeps such a
// pod aside (gated) and asks again only when it is activated or flushed: every reason Admit and the plugin hold a
// pod for comes with the change that clears it and the place that puts the pod back (SchedulingQueue.Activate,
// wakeup.go; the stevedore_pods_woken_total counter, by reason). The plugin registers no node event: the queue
// would weigh every pod held, thousands in a burst, at each node registering or changing, and the provisioner
// knows which pods a node of its own concerns. wakeup_test.go and admit_test.go drive the real scheduling queue
// through these rows; hints_test.go in the plugin's package drives its queueing hint.
//
//	where        | the pod is held because                         | cleared by                                  | woken by
//	-------------+-------------------------------------------------+---------------------------------------------+------------------------------------------
//	PreEnqueue   | no node has room for it: batched                | planned on a node that is ready already     | Activate, PlannedOnExistingNode (nominate)
//	(Admit)      |                                                 | planned on a new node                       | Activate, NodeInitialized (its node ready)
//	             |                                                 | the solve or a NodeClaim's creation failed  | Activate, NotPlanned (provisionBatch)
//	             |                                                 | no NodePool can launch a node for it        | Activate, Unprovisionable (refuse): the
//	             |                                                 |                                             |   scheduler tries it and may preempt
//	PreEnqueue   | its NodeClaim is launching, or its node is      | the node initializes                        | Activate, NodeInitialized (ledger)
//	             |   registered and initializing                   | the NodeClaim goes (launch failed, deleted, | Activate, PlanDropped (the ledger sees it go)
//	             |                                                 |   never registered)                         |
//	             |                                                 | the launched type cannot hold it            | Activate, PlanDropped (Replan)
//	PreEnqueue   | its node is ready, but binding it there now     | a pod of its spread group binds or leaves   | Activate, SpreadChanged (freeroom.Index)
//	             |   breaks its topology spread (holdForSpread)    | replanAfter passes (counted as a refusal)   | Activate, StalePlan: planned again
//	Filter       | room on the node is kept for pods planned there | a planned pod there binds                   | Activate, PlannedPodBound (PostBind)
//	             | and not bound yet (RoomRefused)                 | a planned pod there is deleted              | Activate, PlannedPodGone (pod informer)
//	             |                                                 | a planned pod there is planned elsewhere    | Activate, PlannedPodGone (ledger.Plan)
//	             |                                                 | a planned pod there finds no room and is    | Activate, PlannedPodGone (Consider)
//	             |                                                 |   planned again                             |
//	Filter,      | the pod is planned on another NodeClaim, whose  | its node initializes                        | Activate, NodeInitialized
//	PreFilter    | node is still coming (a pod tried before the    | its NodeClaim goes                          | Activate, PlanDropped
//	             | provisioner started)                            |                                             |
//	PreFilter    | the pod is planned nowhere and the only nodes   | the pod is batched (PostFilter) and planned | as the PreEnqueue rows
//	             | left are initializing for others                |                                             |
//	PostFilter   | batched: waiting for the solve                  | as the PreEnqueue rows                      | as the PreEnqueue rows
//	PostFilter   | waiting for its NodeClaim's node                | the node initializes                        | Activate, NodeInitialized
//	PostFilter   | no NodePool can launch a node for it (cached a  | a NodePool is added or changed, a NodeClaim | Activate, NodePoolsChanged
//	             | minute; preemption runs)                        |   goes away (limits), the instance-type     |
//	             |                                                 |   catalog is read after failed reads, an    |
//	             |                                                 |   EC2NodeClass changes or becomes ready     |
//	Filter       | Stevedore is starting: the node is coming up    | the provisioner adopts the plan the         | Activate, Started (AdoptNominations)
//	             | and the pods planned on it are not known yet    |   NodeClaims' annotations record            |
//	any (planned | its planned node has been ready for replanAfter | (a backstop: a wake-up this table missed;    | Activate, Parked (pending-pod sweep)
//	on a ready   | and it is still not bound                       |   a pod waiting its turn is left there)     |
//	node)        | ... and refused it replanAfter after its first  | (the plan no longer holds: its room or its  | Activate, StalePlan: planned again
//	             |   refusal, and after replanAfter on the node    |   spread taken by pods put there instead)   |
//	Permit       | its node is initializing (Wait)                 | the node initializes                        | WaitingPod.Allow (not a queue: the pod
//	             |                                                 |                                             |   is in its binding cycle)
//	any          | a bound pod on a Stevedore node held its room   | that pod is deleted                         | hint on AssignedPod Delete (skipped for
//	             |                                                 |                                             |   pods waiting for a plan or their node)
//
// The wake-ups of a node's plan changing go only to the pods that node refused in their last attempt (refusedOn),
// so a burst does not retry every pod planned on a node each time one of them binds; a node initializing wakes every
// pod planned there (they wait for it before the queue). Once a pod's planned node has initialized, the queue sort
// (NodeReadyFor) puts it before the pods of its priority not tried yet.
package provision
