/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// Instance states, as EC2 names them.
const (
	statePending      = string(ec2types.InstanceStateNamePending)
	stateRunning      = string(ec2types.InstanceStateNameRunning)
	stateShuttingDown = string(ec2types.InstanceStateNameShuttingDown)
	stateTerminated   = string(ec2types.InstanceStateNameTerminated)
	stateStopping     = string(ec2types.InstanceStateNameStopping)
	stateStopped      = string(ec2types.InstanceStateNameStopped)
)

// Capacity types of an instance (and of the catalog's offerings), as CreateFleet's DefaultTargetCapacityType
// names them.
const (
	capacityTypeSpot          = string(ec2types.DefaultTargetCapacityTypeSpot)
	capacityTypeOnDemand      = string(ec2types.DefaultTargetCapacityTypeOnDemand)
	capacityTypeCapacityBlock = string(ec2types.DefaultTargetCapacityTypeCapacityBlock)
)

// Subnet is an emulated VPC subnet.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	CIDRPrefix   string // "10.0.1." - instances get the next host address
	AvailableIPs int
	Tags         map[string]string
	nextHost     int
}

// SecurityGroup is an emulated security group.
type SecurityGroup struct {
	ID, Name string
	Tags     map[string]string
}

// Image is an emulated AMI.
type Image struct {
	ID, Name, Architecture, OwnerID string
	Created                         time.Time
	Tags                            map[string]string
}

// LaunchTemplate is an emulated launch template, with the launch data Stevedore sent.
type LaunchTemplate struct {
	ID, Name string
	Created  time.Time
	Tags     map[string]string
	Data     LaunchTemplateData
}

// LaunchTemplateData is the part of a launch template the emulator keeps.
type LaunchTemplateData struct {
	ImageID                 string
	UserData                string // decoded
	InstanceProfile         string
	SecurityGroupIDs        []string
	HTTPTokens              string
	HTTPPutResponseHopLimit int
	HTTPEndpoint            string
	BlockDevices            []BlockDevice
	// NetworkInterfaces are the instance's interfaces when the template sets them (the security groups are then
	// theirs).
	NetworkInterfaces []NetworkInterface
	Tags              map[string]map[string]string // by resource type
	// CapacityReservationID is the reservation the template's launches target; MarketType "capacity-block" for
	// a Capacity Block.
	CapacityReservationID string
	MarketType            string
}

// BlockDevice is an EBS volume of a launch template.
type BlockDevice struct {
	DeviceName               string
	VolumeSize               int
	VolumeType               string
	Encrypted                bool
	SnapshotID               string
	VolumeInitializationRate int
}

// NetworkInterface is a network interface of a launch template.
type NetworkInterface struct {
	DeviceIndex      int
	NetworkCardIndex int
	// InterfaceType is "efa", or "" for an ENA interface.
	InterfaceType  string
	SecurityGroups []string
	// AssociatePublicIP is "true", "false", or "" when the subnet decides.
	AssociatePublicIP string
	// Connection tracking timeouts in seconds (0: EC2's default).
	TCPEstablishedTimeout, UDPStreamTimeout, UDPTimeout int
}

// Instance is an emulated EC2 instance.
type Instance struct {
	ID             string
	Type           string
	Architecture   string
	Zone           string
	SubnetID       string
	ImageID        string
	PrivateIP      string
	PrivateDNSName string
	// CapacityType is "spot" or "on-demand".
	CapacityType string
	Price        float64
	State        string
	StateReason  string
	LaunchTime   time.Time
	// TerminatedAt is when termination began (the state left running): EC2 bills an instance from LaunchTime
	// to then. Zero while it runs.
	TerminatedAt   time.Time
	Tags           map[string]string
	LaunchTemplate LaunchTemplateData
	ClientToken    string
	// CapacityReservationID is the reservation the instance runs in ("" for none).
	CapacityReservationID string
	// PlacementGroup is the name of the placement group the instance runs in ("" for none).
	PlacementGroup string
	// Reboots counts RebootInstances calls on the instance.
	Reboots int
}

// ProviderID is the Kubernetes provider ID of the instance's node.
func (i *Instance) ProviderID() string { return fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID) }

// UserDataBase64 is the user data as EC2 stores it.
func (i *Instance) UserDataBase64() string {
	return base64.StdEncoding.EncodeToString([]byte(i.LaunchTemplate.UserData))
}

func (i *Instance) clone() *Instance {
	out := *i
	out.Tags = cloneMap(i.Tags)
	return &out
}

// State codes, as EC2 numbers them.
var stateCodes = map[string]int{statePending: 0, stateRunning: 16, stateShuttingDown: 32, stateTerminated: 48, stateStopping: 64, stateStopped: 80}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// offeringKey names a capacity pool.
func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

// catalogIndex looks instance types up by name.
type catalogIndex map[string]catalog.InstanceType

func indexCatalog(c *catalog.File) catalogIndex {
	out := catalogIndex{}
	for _, it := range c.InstanceTypes {
		out[it.Name] = it
	}
	return out
}

func (c catalogIndex) price(instanceType, zone, capacityType string) (float64, bool) {
	it, ok := c[instanceType]
	if !ok {
		return 0, false
	}
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o.Price, true
		}
	}
	return 0, false
}

// zoneLetter returns the letter of an availability zone ("us-east-1a" -> "a").
func zoneLetter(zone string) string {
	if zone == "" {
		return ""
	}
	return zone[len(zone)-1:]
}

// privateDNSName is how EC2 names an instance by its private address: ip-10-0-1-23.ec2.internal in us-east-1,
// ip-10-0-1-23.<region>.compute.internal elsewhere.
func privateDNSName(ip, region string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}
