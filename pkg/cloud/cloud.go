/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package cloud is the only door from Stevedore to the cloud: launch a node for a NodeClaim, delete it, find
// instances, list the instance types and offerings a NodePool may use, and tell whether a node drifted from its
// node class. Package aws implements it on aws-sdk-go-v2; package catalog reads instance-type catalogs.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Provider is implemented by each cloud.
type Provider interface {
	// Create launches one instance for the NodeClaim. The NodeClaim's requirements say which instance types
	// (node.kubernetes.io/instance-type, cheapest first), zones and capacity types it may use; the provider
	// picks the offering. Offerings that fail for lack of capacity are marked unavailable and the rest tried.
	Create(ctx context.Context, claim *stevedorev1.NodeClaim) (*Instance, error)
	// Delete terminates the instance. It refuses instances without this cluster's ownership tag. Deleting an
	// instance that is already gone is not an error.
	Delete(ctx context.Context, instanceID string) error
	// Reboot restarts the instance in place (same instance, same volumes); the node's pods stay bound. It refuses
	// instances without this cluster's ownership tag.
	Reboot(ctx context.Context, instanceID string) error
	// Get returns the instance, or an error wrapping ErrNotFound.
	Get(ctx context.Context, instanceID string) (*Instance, error)
	// List returns every live (not terminated) instance this cluster owns.
	List(ctx context.Context) ([]*Instance, error)
	// InstanceTypes returns the instance types the NodePool's node class can launch, with their capacity,
	// overhead and offerings (zones of its subnets, capacity types, prices, availability).
	InstanceTypes(ctx context.Context, nodePool *stevedorev1.NodePool) ([]*InstanceType, error)
	// IsDrifted returns why the NodeClaim's instance no longer matches its node class ("" if it does).
	IsDrifted(ctx context.Context, claim *stevedorev1.NodeClaim) (string, error)
	// MarkUnavailable records that an offering has no capacity now (e.g. a spot interruption).
	MarkUnavailable(instanceType, zone, capacityType, reason string)
}

// LaunchTemplateCollector is a Provider that keeps launch templates and deletes those no launch uses any more; the
// garbage collector calls it every run.
type LaunchTemplateCollector interface {
	CollectLaunchTemplates(ctx context.Context) (int, error)
}

// PlacementGroupCollector is a Provider that creates placement groups for gangs and deletes those no instance runs
// in any more; the garbage collector calls it every run.
type PlacementGroupCollector interface {
	CollectPlacementGroups(ctx context.Context) (int, error)
}

// Instance is a launched instance.
type Instance struct {
	ID           string
	ProviderID   string
	NodeName     string
	Type         string
	Zone         string
	CapacityType string
	ImageID      string
	State        string
	Price        float64
	LaunchTime   time.Time
	Tags         map[string]string
	// ZoneID of the instance's zone (use1-az1), when known.
	ZoneID string
	// CapacityReservationID, CapacityReservationType (default or capacity-block) and whether the reservation is
	// interruptible, of a reserved instance.
	CapacityReservationID            string
	CapacityReservationType          string
	CapacityReservationInterruptible bool
}

// LaunchLabels are the labels the launch decided beyond what the NodeClaim's status records (instance type, zone
// and its ID, capacity type): the reservation of a reserved instance.
func (i *Instance) LaunchLabels() map[string]string {
	out := map[string]string{}
	if i.CapacityReservationID != "" {
		out[stevedorev1.LabelCapacityReservationID] = i.CapacityReservationID
		out[stevedorev1.LabelCapacityReservationType] = i.CapacityReservationType
		out[stevedorev1.LabelCapacityReservationInterruptible] = strconv.FormatBool(i.CapacityReservationInterruptible)
	}
	return out
}

// Instance states, as EC2 names them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

// CapacityBlockReclaim is how long before a Capacity Block ends EC2 starts terminating its instances, and
// CapacityBlockDrainLead how long before its end Stevedore replaces and drains them (ten minutes earlier, as
// Karpenter does).
const (
	CapacityBlockReclaim   = 30 * time.Minute
	CapacityBlockDrainLead = CapacityBlockReclaim + 10*time.Minute
)

// ErrNotFound is wrapped by errors about instances that do not exist.
var ErrNotFound = errors.New("instance not found")

// ErrNotOwned is wrapped by the refusal to terminate an instance that lacks this cluster's ownership tag.
var ErrNotOwned = errors.New("instance not owned by this cluster")

// InsufficientCapacityError says no offering of a NodeClaim could be launched now.
type InsufficientCapacityError struct {
	// Tried lists the offerings that failed, as "type/zone/capacity-type: code".
	Tried []string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity in every offering tried (%d): %v", len(e.Tried), e.Tried)
}

// NodeClassNotReadyError says the node class cannot be used yet (no subnet, security group or AMI resolved).
type NodeClassNotReadyError struct {
	Name   string
	Reason string
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("EC2NodeClass %s is not ready: %s", e.Name, e.Reason)
}

// LaunchConfigurationError is an error a retry will not fix without a change by the user: a missing spot
// service-linked role, an exceeded quota, an unauthorized operation, an invalid parameter.
type LaunchConfigurationError struct {
	Code    string
	Message string
	Hint    string
}

func (e *LaunchConfigurationError) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Hint)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}
