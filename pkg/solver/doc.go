/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package solver decides which nodes to launch for pods no node fits, and which pods go on each: the cheapest set
// of EC2 instances (NodePools by weight, their instance types, zones and capacity types) on which kube-scheduler's
// own PreFilter and Filter plugins accept every pod with all the others in place. It knows nothing of the API
// server or the cloud: the live provisioner and `scheduler plan` give it the same Input.
//
// The algorithm, file by file:
//
//   - solver.go: Solve. Pods are taken hardest first (orderPods: required anti-affinity, hard spreads, required
//     affinity, the rest; largest first; the pods another pod's affinity selects before it). Each pod is placed by
//     place.go; a pod that cannot be placed is unschedulable with the reason of the last NodePool tried. When greedy
//     placement strands pods, the solve starts over (repairOrder: stranded pods first, each with the pod its
//     affinity needs placed where it can follow), and a small batch is retried in other orders and with randomised
//     choices; the attempt placing the most pods, then the cheapest, is kept.
//   - place.go: one placement. A pod goes on a node being launched (in-flight), on an open virtual node whose price
//     grows least, or on a new virtual node (newnode.go), whichever costs less; preference levels (podreqs.go)
//     are tried strictest first, never buying a node for a preference. Every try narrows the virtual node (its
//     candidate instance types, zone, capacity type, labels) to what the pod needs (offerings.go) and runs the
//     Filter plugins on it in the simulation snapshot (package simulation); a try a hostname anti-affinity or
//     hostname spread refuses whatever the narrowing is skipped before it. trial.go: one try, with the snapshot
//     suspended and the try undone from the snapshot's own undo log (Rollback), applied again only if it passes.
//     What a try derives from a candidate list (its largest type, the narrowed list, the offering choices) is
//     memoised per list and shared by alike nodes; pricelists.go interns the lists so that alike nodes hold one.
//     An attempt's state (solver.go's solve) keeps apart what it was given, the plan being built, its caches (each
//     with the invariant that keeps it true) and its scratch space.
//   - candidates.go: the open nodes a placement tries, kept per placement shape (requests, companion room,
//     NodePools, zone care) best first and brought up to date from the nodes changed since, so a placement costs
//     what changed, not a walk over every open node.
//   - opennode.go: a virtual node: candidate instance types, the cheapest type holding its pods, the labels it
//     will have (NodeLabels: only what its NodePool, instance type and offering define).
//   - spread.go: hard topology spread constraints kept satisfiable in any binding order (domains, eligibility by
//     node inclusion policies, minDomains, matchLabelKeys). affinity.go: pod affinity that holds only by a pod
//     selecting itself, and where improvement may move a pod (within the domains a required affinity relies on).
//   - daemonsets.go: which DaemonSet pods run on a node, decided by the Filter plugins per instance type.
//   - limits.go: NodePool limits. finish.go: the planned nodes (cheapest fitting types first, NodePool-defined
//     labels pinned). improve.go: moves that lower the price within a budget of moves: emptying
//     a node, moving a pod off a node that can then use a cheaper type, and moving a pod at no cost to the node it
//     leaves with the least room, so that room spread thin gathers on fewer nodes until one of them shrinks.
//   - nodepools.go: NodePools as solver input (requirements, compatible instance types, minValues); offline.go:
//     `scheduler plan`'s input (workloads expanded, the existing cluster); verify.go: the independent check that
//     every placement of a plan passes the Filter plugins.
//
// The same input always gives the same plan.
package solver
