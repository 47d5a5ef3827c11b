/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/xml"
	"time"
)

// EC2 response shapes. Element names are what aws-sdk-go-v2's EC2 deserializers look for; lists are a wrapper
// element holding <item> children.

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagSet(tags map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlInstance struct {
	InstanceID     string   `xml:"instanceId"`
	ImageID        string   `xml:"imageId"`
	State          xmlState `xml:"instanceState"`
	PrivateDNSName string   `xml:"privateDnsName"`
	InstanceType   string   `xml:"instanceType"`
	LaunchTime     string   `xml:"launchTime"`
	Placement      struct {
		AvailabilityZone string `xml:"availabilityZone"`
		GroupName        string `xml:"groupName,omitempty"`
	} `xml:"placement"`
	SubnetID          string `xml:"subnetId"`
	VpcID             string `xml:"vpcId"`
	PrivateIPAddress  string `xml:"privateIpAddress"`
	Architecture      string `xml:"architecture"`
	InstanceLifecycle string `xml:"instanceLifecycle,omitempty"`
	ClientToken       string `xml:"clientToken,omitempty"`
	// CapacityReservationID of an instance launched into a reservation.
	CapacityReservationID string   `xml:"capacityReservationId,omitempty"`
	Tags                  []xmlTag `xml:"tagSet>item"`
	StateReason           *struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	} `xml:"stateReason,omitempty"`
	MetadataOptions struct {
		HTTPTokens              string `xml:"httpTokens"`
		HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
		HTTPEndpoint            string `xml:"httpEndpoint"`
	} `xml:"metadataOptions"`
	NetworkInterfaces []xmlInstanceNetworkInterface `xml:"networkInterfaceSet>item"`
}

// xmlInstanceNetworkInterface is a network interface of an instance in DescribeInstances.
type xmlInstanceNetworkInterface struct {
	NetworkInterfaceID string `xml:"networkInterfaceId"`
	SubnetID           string `xml:"subnetId"`
	InterfaceType      string `xml:"interfaceType"`
	Attachment         struct {
		DeviceIndex      int `xml:"deviceIndex"`
		NetworkCardIndex int `xml:"networkCardIndex"`
	} `xml:"attachment"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	XMLName   xml.Name         `xml:"TerminateInstancesResponse"`
	RequestID string           `xml:"requestId"`
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type rebootInstancesResponse struct {
	XMLName   xml.Name `xml:"RebootInstancesResponse"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}

type xmlOverrides struct {
	InstanceType     string `xml:"instanceType,omitempty"`
	SubnetID         string `xml:"subnetId,omitempty"`
	AvailabilityZone string `xml:"availabilityZone,omitempty"`
	ImageID          string `xml:"imageId,omitempty"`
}

type xmlLaunchTemplateAndOverrides struct {
	LaunchTemplateSpecification struct {
		LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
		LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
		Version            string `xml:"version,omitempty"`
	} `xml:"launchTemplateSpecification"`
	Overrides xmlOverrides `xml:"overrides"`
}

type xmlFleetError struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	ErrorCode                  string                        `xml:"errorCode"`
	ErrorMessage               string                        `xml:"errorMessage"`
}

type xmlFleetInstance struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	InstanceIDs                []string                      `xml:"instanceIds>item"`
	InstanceType               string                        `xml:"instanceType"`
	AvailabilityZone           string                        `xml:"availabilityZone,omitempty"`
	SubnetID                   string                        `xml:"subnetId,omitempty"`
}

type createFleetResponse struct {
	XMLName   xml.Name           `xml:"CreateFleetResponse"`
	RequestID string             `xml:"requestId"`
	FleetID   string             `xml:"fleetId"`
	Errors    []xmlFleetError    `xml:"errorSet>item"`
	Instances []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}

type xmlInstanceTypeInfo struct {
	InstanceType      string   `xml:"instanceType"`
	CurrentGeneration bool     `xml:"currentGeneration"`
	BareMetal         bool     `xml:"bareMetal"`
	Hypervisor        string   `xml:"hypervisor,omitempty"`
	UsageClasses      []string `xml:"supportedUsageClasses>item"`
	ProcessorInfo     struct {
		Architectures            []string `xml:"supportedArchitectures>item"`
		Manufacturer             string   `xml:"manufacturer,omitempty"`
		SustainedClockSpeedInGhz float64  `xml:"sustainedClockSpeedInGhz,omitempty"`
	} `xml:"processorInfo"`
	EBSInfo  *xmlEBSInfo `xml:"ebsInfo,omitempty"`
	VCPUInfo struct {
		DefaultVCPUs int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	MemoryInfo struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	NetworkInfo struct {
		MaximumNetworkInterfaces  int              `xml:"maximumNetworkInterfaces"`
		IPv4AddressesPerInterface int              `xml:"ipv4AddressesPerInterface"`
		EFASupported              bool             `xml:"efaSupported"`
		EncryptionInTransit       bool             `xml:"encryptionInTransitSupported"`
		EFAInfo                   *xmlEFAInfo      `xml:"efaInfo,omitempty"`
		NetworkCards              []xmlNetworkCard `xml:"networkCards>item,omitempty"`
	} `xml:"networkInfo"`
	GPUInfo                  *xmlGPUInfo         `xml:"gpuInfo,omitempty"`
	NeuronInfo               *xmlNeuronInfo      `xml:"neuronInfo,omitempty"`
	InstanceStorageSupported bool                `xml:"instanceStorageSupported"`
	InstanceStorageInfo      *xmlInstanceStorage `xml:"instanceStorageInfo,omitempty"`
}

type xmlEBSInfo struct {
	EBSOptimizedSupport string               `xml:"ebsOptimizedSupport"`
	EBSOptimizedInfo    *xmlEBSOptimizedInfo `xml:"ebsOptimizedInfo,omitempty"`
}

type xmlEBSOptimizedInfo struct {
	MaximumBandwidthInMbps int `xml:"maximumBandwidthInMbps"`
}

type xmlEFAInfo struct {
	MaximumEFAInterfaces int `xml:"maximumEfaInterfaces"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int     `xml:"networkCardIndex"`
	MaximumNetworkInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps,omitempty"`
}

type xmlMemoryInfo struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xmlGPUInfo struct {
	GPUs                []xmlGPUDevice `xml:"gpus>item"`
	TotalGPUMemoryInMiB int64          `xml:"totalGpuMemoryInMiB"`
}

type xmlGPUDevice struct {
	Name         string        `xml:"name"`
	Manufacturer string        `xml:"manufacturer"`
	Count        int           `xml:"count"`
	MemoryInfo   xmlMemoryInfo `xml:"memoryInfo"`
}

type xmlNeuronInfo struct {
	NeuronDevices                []xmlNeuronDevice `xml:"neuronDevices>item"`
	TotalNeuronDeviceMemoryInMiB int64             `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlNeuronDevice struct {
	Name     string `xml:"name"`
	Count    int    `xml:"count"`
	CoreInfo struct {
		Count int `xml:"count"`
	} `xml:"coreInfo"`
	MemoryInfo xmlMemoryInfo `xml:"memoryInfo"`
}

type xmlInstanceStorage struct {
	TotalSizeInGB int    `xml:"totalSizeInGB"`
	NVMeSupport   string `xml:"nvmeSupport"`
}

type describeInstanceTypesResponse struct {
	XMLName       xml.Name              `xml:"DescribeInstanceTypesResponse"`
	RequestID     string                `xml:"requestId"`
	InstanceTypes []xmlInstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken     string                `xml:"nextToken,omitempty"`
}

type xmlInstanceTypeOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeInstanceTypeOfferingsResponse struct {
	XMLName   xml.Name                  `xml:"DescribeInstanceTypeOfferingsResponse"`
	RequestID string                    `xml:"requestId"`
	Offerings []xmlInstanceTypeOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string                    `xml:"nextToken,omitempty"`
}

type xmlSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryResponse struct {
	XMLName   xml.Name       `xml:"DescribeSpotPriceHistoryResponse"`
	RequestID string         `xml:"requestId"`
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken"`
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	VpcID                   string   `xml:"vpcId"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	CidrBlock               string   `xml:"cidrBlock"`
	State                   string   `xml:"state"`
	Tags                    []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
	RequestID string      `xml:"requestId"`
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
}

type xmlSecurityGroup struct {
	GroupID          string   `xml:"groupId"`
	GroupName        string   `xml:"groupName"`
	GroupDescription string   `xml:"groupDescription"`
	VpcID            string   `xml:"vpcId"`
	OwnerID          string   `xml:"ownerId"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	XMLName   xml.Name           `xml:"DescribeSecurityGroupsResponse"`
	RequestID string             `xml:"requestId"`
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
}

type xmlImage struct {
	ImageID      string   `xml:"imageId"`
	Name         string   `xml:"name"`
	Architecture string   `xml:"architecture"`
	OwnerID      string   `xml:"imageOwnerId"`
	CreationDate string   `xml:"creationDate"`
	State        string   `xml:"imageState"`
	Tags         []xmlTag `xml:"tagSet>item"`
}

type describeImagesResponse struct {
	XMLName   xml.Name   `xml:"DescribeImagesResponse"`
	RequestID string     `xml:"requestId"`
	Images    []xmlImage `xml:"imagesSet>item"`
}

type xmlLaunchTemplate struct {
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int      `xml:"defaultVersionNumber"`
	LatestVersionNumber  int      `xml:"latestVersionNumber"`
	Tags                 []xmlTag `xml:"tagSet>item"`
}

type createLaunchTemplateResponse struct {
	XMLName        xml.Name          `xml:"CreateLaunchTemplateResponse"`
	RequestID      string            `xml:"requestId"`
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

type describeLaunchTemplatesResponse struct {
	XMLName         xml.Name            `xml:"DescribeLaunchTemplatesResponse"`
	RequestID       string              `xml:"requestId"`
	LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

type deleteLaunchTemplateResponse struct {
	XMLName        xml.Name          `xml:"DeleteLaunchTemplateResponse"`
	RequestID      string            `xml:"requestId"`
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

type createTagsResponse struct {
	XMLName   xml.Name `xml:"CreateTagsResponse"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}

type ec2ErrorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  struct {
		Error struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	} `xml:"Errors"`
	RequestID string `xml:"RequestID"`
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
