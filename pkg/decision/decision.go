/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package decision is what provisioning decides for a pod no node fits: the words the scheduler plugin and the
// provisioner share, so that the plugin needs nothing else of the provisioner's.
package decision

// Kind is what provisioning did with a pod.
type Kind int

// Kinds of decision.
const (
	// Nominated: the pod goes to a node being launched, whose name is known.
	Nominated Kind = iota
	// Waiting: the pod goes to a NodeClaim whose instance has not been launched yet.
	Waiting
	// Batched: the pod waits in the open batch.
	Batched
	// Unprovisionable: no NodePool can launch a node for the pod (Reason says why).
	Unprovisionable
)

// Decision is provisioning's answer for a pod.
type Decision struct {
	Kind Kind
	// NodeName is the node the pod is nominated to (Nominated).
	NodeName string
	// Claim is the NodeClaim the pod is planned on (Nominated, Waiting).
	Claim string
	// Reason says why no NodePool can launch a node for the pod (Unprovisionable).
	Reason string
}
