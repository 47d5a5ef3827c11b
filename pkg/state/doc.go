// Package state holds what the scheduler plugins and the background loops share inside one scheduler process:
// leadership, and (from the provisioning work on) the cluster's nodes, NodeClaims and in-flight capacity.
package state
