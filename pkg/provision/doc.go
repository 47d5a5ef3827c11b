// Package provision turns the solver's plans into nodes and keeps them: the provisioner batches the pods no node
// fits (PostFilter), solves each batch (package solver) and creates one NodeClaim per planned node, nominating each
// pod to the node coming up for it (nominate.go) and keeping the room of planned pods until they bind
// (noderoom.go). The NodeClaim lifecycle launches the instance, registers and initializes its node, and lets a
// NodeClaim that never registers go (lifecycle.go); termination drains and terminates whatever deleted a NodeClaim
// (termination.go). cluster.go answers disruption's "what if these nodes went away".
package provision
