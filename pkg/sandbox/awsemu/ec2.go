/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// codeInvalidParameterValue is the error code of a request with a value the API (or the emulator) does not take.
const codeInvalidParameterValue = "InvalidParameterValue"

// interfaceTypeEFA is the InterfaceType of an Elastic Fabric Adapter interface.
const interfaceTypeEFA = "efa"

// codeInsufficientCapacity is EC2's error code for a pool out of capacity.
const codeInsufficientCapacity = "InsufficientInstanceCapacity"

// tagName is the tag the EC2 console shows as a resource's name.
const tagName = "Name"

// Architectures as the catalog (and Kubernetes) name them; ec2Arch turns them into EC2's names.
const (
	archAMD64 = "amd64"
	archARM64 = "arm64"
)

// InstanceHooks are called (outside the emulator's lock) when an emulated instance changes state; the sandbox
// uses them to register and remove Nodes as kubelets and the cloud node controller would.
type InstanceHooks struct {
	Running    func(*Instance)
	Terminated func(*Instance)
	// Rebooted is called after RebootInstances restarted a running instance.
	Rebooted func(*Instance)
}

// EC2 is the emulated EC2 service of one region.
type EC2 struct {
	region    string
	partition string // in ARNs: aws, aws-cn, aws-us-gov
	accountID string
	vpcID     string
	clock     clock.WithDelayedExecution
	// iam answers whether a launch template's instance profile exists
	iam *IAM

	mu              sync.Mutex
	catalog         catalogIndex
	instanceTypes   []catalog.InstanceType
	subnets         []*Subnet
	securityGroups  []*SecurityGroup
	images          []*Image
	templates       map[string]*LaunchTemplate // by name
	instances       map[string]*Instance
	order           []string                        // instance ids, launch order
	fleets          map[string]*createFleetResponse // by client token
	capacity        map[string]int                  // remaining instances per pool; absent = unlimited
	reservations    map[string]*CapacityReservation // by id
	placementGroups map[string]*PlacementGroup      // by name
	nextID          int
	hooks           InstanceHooks
	// PendingDuration and ShuttingDownDuration are how long instances stay pending and shutting-down.
	pendingDuration, shuttingDownDuration time.Duration
	calls                                 map[string]int
	lastRequests                          map[string]url.Values
}

func newEC2(region, accountID string, cat *catalog.File, clk clock.WithDelayedExecution) *EC2 {
	e := &EC2{
		region: region, partition: catalog.PartitionOf(region), accountID: accountID, vpcID: "vpc-0sandbox0000001", clock: clk,
		catalog: indexCatalog(cat), instanceTypes: cat.InstanceTypes,
		templates: map[string]*LaunchTemplate{}, instances: map[string]*Instance{},
		fleets: map[string]*createFleetResponse{}, capacity: map[string]int{}, calls: map[string]int{},
		reservations:    map[string]*CapacityReservation{},
		placementGroups: map[string]*PlacementGroup{},
		lastRequests:    map[string]url.Values{},
		pendingDuration: 50 * time.Millisecond, shuttingDownDuration: 50 * time.Millisecond,
	}
	return e
}

// seedNetwork creates one subnet per zone and a node security group, all tagged for discovery by clusterName,
// plus the cluster security group EKS creates.
func (e *EC2) seedNetwork(clusterName string, zones []string) {
	for i, z := range zones {
		e.subnets = append(e.subnets, &Subnet{
			ID: fmt.Sprintf("subnet-0%s%012d", zoneLetter(z), i+1), Zone: z,
			ZoneID: fmt.Sprintf("use1-az%d", i+1), CIDRPrefix: fmt.Sprintf("10.0.%d.", 16+i*16),
			AvailableIPs: 4000, nextHost: 10,
			Tags: map[string]string{"karpenter.sh/discovery": clusterName, tagName: clusterName + "-private-" + z,
				"kubernetes.io/role/internal-elb": "1"},
		})
	}
	e.securityGroups = append(e.securityGroups,
		&SecurityGroup{ID: "sg-0nodes00000000001", Name: clusterName + "-node",
			Tags: map[string]string{"karpenter.sh/discovery": clusterName, tagName: clusterName + "-node"}},
		&SecurityGroup{ID: "sg-0cluster000000001", Name: "eks-cluster-sg-" + clusterName,
			Tags: map[string]string{"aws:eks:cluster-name": clusterName, "kubernetes.io/cluster/" + clusterName: "owned"}},
	)
}

func (e *EC2) newID(prefix string) string {
	e.nextID++
	return fmt.Sprintf("%s-0%016x", prefix, 0x5e7ed0000+e.nextID)
}

// handle serves one EC2 Query request. The caller holds no lock.
//
//nolint:gocyclo // a dispatch table: one case per EC2 action the emulator serves
func (e *EC2) handle(w http.ResponseWriter, q *query, form url.Values) {
	action := q.Str("Action")
	e.mu.Lock()
	e.calls[action]++
	e.lastRequests[action] = form
	e.mu.Unlock()
	if v := q.Str("Version"); v != "2016-11-15" {
		writeEC2Error(w, http.StatusBadRequest, codeInvalidParameterValue, fmt.Sprintf("unsupported API version %q", v))
		return
	}
	var (
		resp any
		err  *apiError
	)
	switch action {
	case "DescribeInstanceTypes":
		resp, err = e.describeInstanceTypes(q)
	case "DescribeInstanceTypeOfferings":
		resp, err = e.describeInstanceTypeOfferings(q)
	case "DescribeSpotPriceHistory":
		resp, err = e.describeSpotPriceHistory(q)
	case "DescribeSubnets":
		resp, err = e.describeSubnets(q)
	case "DescribeSecurityGroups":
		resp, err = e.describeSecurityGroups(q)
	case "DescribeImages":
		resp, err = e.describeImages(q)
	case "CreateLaunchTemplate":
		resp, err = e.createLaunchTemplate(q)
	case "DescribeLaunchTemplates":
		resp, err = e.describeLaunchTemplates(q)
	case "DeleteLaunchTemplate":
		resp, err = e.deleteLaunchTemplate(q)
	case "CreateFleet":
		resp, err = e.createFleet(q)
	case "DescribeInstances":
		resp, err = e.describeInstances(q)
	case "TerminateInstances":
		resp, err = e.terminateInstances(q)
	case "RebootInstances":
		resp, err = e.rebootInstances(q)
	case "CreateTags":
		resp, err = e.createTags(q)
	case "CreateCapacityReservation":
		resp, err = e.createCapacityReservation(q)
	case "DescribeCapacityReservations":
		resp, err = e.describeCapacityReservations(q)
	case "CreatePlacementGroup":
		resp, err = e.createPlacementGroup(q)
	case "DescribePlacementGroups":
		resp, err = e.describePlacementGroups(q)
	case "DeletePlacementGroup":
		resp, err = e.deletePlacementGroup(q)
	default:
		err = &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the action %s is not valid for this web service", action)}
	}
	if err != nil {
		writeEC2Error(w, err.status, err.code, err.message)
		return
	}
	writeXML(w, resp)
}

// LastRequest returns the form values of the last request of an action (nil if none).
func (e *EC2) LastRequest(action string) url.Values {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastRequests[action]
}

// Calls returns how many requests of each action the emulator served.
func (e *EC2) Calls() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return cloneCounts(e.calls)
}

type apiError struct {
	status        int
	code, message string
}

func invalid(code, format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

// paginate returns the page of n items that starts at token (an index) and the next token.
func paginate(n int, q *query, defaultMax int) (start, end int, next string) {
	start, _ = strconv.Atoi(q.Str("NextToken"))
	limit := q.Int("MaxResults", defaultMax)
	if limit <= 0 {
		limit = defaultMax
	}
	// a token the emulator did not give reads from the start (negative) or gives an empty page (past the end)
	start = min(max(start, 0), n)
	end = start + min(limit, n-start)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next
}

func (e *EC2) describeInstanceTypes(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want := q.Strings("InstanceType")
	var items []xmlInstanceTypeInfo
	for _, it := range e.instanceTypes {
		if len(want) > 0 && !matchValue(want, it.Name) {
			continue
		}
		match := true
		for _, f := range q.Filters() {
			switch f.Name {
			case filterInstanceType:
				match = match && matchValue(f.Values, it.Name)
			case "processor-info.supported-architecture":
				match = match && matchValue(f.Values, ec2Arch(it.Architecture))
			case "current-generation":
				match = match && matchValue(f.Values, "true")
			}
		}
		if !match {
			continue
		}
		info := xmlInstanceTypeInfo{InstanceType: it.Name, CurrentGeneration: true, Hypervisor: it.Hypervisor,
			UsageClasses: []string{string(ec2types.UsageClassTypeOnDemand), string(ec2types.UsageClassTypeSpot)}}
		info.ProcessorInfo.Architectures = []string{ec2Arch(it.Architecture)}
		info.ProcessorInfo.Manufacturer = it.CPUManufacturer
		info.ProcessorInfo.SustainedClockSpeedInGhz = float64(it.SustainedClockSpeedMHz) / 1000
		info.NetworkInfo.EncryptionInTransit = it.EncryptionInTransit
		if it.EBSBandwidthMbps > 0 {
			info.EBSInfo = &xmlEBSInfo{EBSOptimizedSupport: "default", EBSOptimizedInfo: &xmlEBSOptimizedInfo{MaximumBandwidthInMbps: it.EBSBandwidthMbps}}
		}
		info.VCPUInfo.DefaultVCPUs = it.VCPU
		info.MemoryInfo.SizeInMiB = it.MemoryMiB
		enis, ips := it.ENIs, it.IPv4PerENI
		if enis == 0 {
			// a catalog that gives maxPods only: present ENIs that yield it (1 ENI of maxPods-1+... addresses)
			enis, ips = 1, it.MaxPods-1+1
		}
		info.NetworkInfo.MaximumNetworkInterfaces = enis
		info.NetworkInfo.IPv4AddressesPerInterface = ips
		describeAccelerators(&info, it)
		items = append(items, info)
	}
	start, end, next := paginate(len(items), q, 100)
	return &describeInstanceTypesResponse{RequestID: uuid.NewString(), InstanceTypes: items[start:end], NextToken: next}, nil
}

// describeAccelerators fills the GPU, Neuron, EFA, instance-storage and bandwidth parts of a type's description
// from its catalog entry.
func describeAccelerators(info *xmlInstanceTypeInfo, it catalog.InstanceType) {
	if g := it.GPUs; g != nil {
		info.GPUInfo = &xmlGPUInfo{TotalGPUMemoryInMiB: g.MemoryMiB * int64(g.Count), GPUs: []xmlGPUDevice{{
			Name: g.Name, Manufacturer: g.Manufacturer, Count: g.Count, MemoryInfo: xmlMemoryInfo{SizeInMiB: g.MemoryMiB}}}}
	}
	if n := it.Neuron; n != nil {
		d := xmlNeuronDevice{Name: n.Name, Count: n.Count, MemoryInfo: xmlMemoryInfo{SizeInMiB: n.MemoryMiB}}
		d.CoreInfo.Count = n.CoresPerDevice
		info.NeuronInfo = &xmlNeuronInfo{TotalNeuronDeviceMemoryInMiB: n.MemoryMiB * int64(n.Count), NeuronDevices: []xmlNeuronDevice{d}}
	}
	if it.EFA > 0 {
		info.NetworkInfo.EFASupported = true
		info.NetworkInfo.EFAInfo = &xmlEFAInfo{MaximumEFAInterfaces: it.EFA}
	}
	info.NetworkInfo.NetworkCards = nil
	for i := range networkCards(it.EFA) {
		card := xmlNetworkCard{NetworkCardIndex: i, MaximumNetworkInterfaces: info.NetworkInfo.MaximumNetworkInterfaces}
		if it.NetworkBandwidthMbps > 0 {
			card.BaselineBandwidthInGbps = float64(it.NetworkBandwidthMbps) / 1000
		}
		info.NetworkInfo.NetworkCards = append(info.NetworkInfo.NetworkCards, card)
	}
	if it.LocalNVMeGB > 0 {
		info.InstanceStorageSupported = true
		info.InstanceStorageInfo = &xmlInstanceStorage{TotalSizeInGB: it.LocalNVMeGB, NVMeSupport: "required"}
	}
}

func ec2Arch(arch string) string {
	if arch == archAMD64 {
		return string(ec2types.ArchitectureValuesX8664)
	}
	return arch
}

func (e *EC2) describeInstanceTypeOfferings(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if lt := q.Str("LocationType"); lt != "" && lt != string(ec2types.LocationTypeAvailabilityZone) {
		return nil, invalid(codeInvalidParameterValue, "LocationType %q is not supported by the emulator", lt)
	}
	var items []xmlInstanceTypeOffering
	for _, it := range e.instanceTypes {
		zones := map[string]bool{}
		for _, o := range it.Offerings {
			zones[o.Zone] = true
		}
		for _, z := range sortedKeys(zones) {
			match := true
			for _, f := range q.Filters() {
				switch f.Name {
				case filterInstanceType:
					match = match && matchValue(f.Values, it.Name)
				case "location":
					match = match && matchValue(f.Values, z)
				}
			}
			if match {
				items = append(items, xmlInstanceTypeOffering{InstanceType: it.Name, LocationType: string(ec2types.LocationTypeAvailabilityZone), Location: z})
			}
		}
	}
	start, end, next := paginate(len(items), q, 1000)
	return &describeInstanceTypeOfferingsResponse{RequestID: uuid.NewString(), Offerings: items[start:end], NextToken: next}, nil
}

func (e *EC2) describeSpotPriceHistory(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	want := q.Strings("InstanceType")
	now := isoTime(e.clock.Now())
	var items []xmlSpotPrice
	for _, it := range e.instanceTypes {
		if len(want) > 0 && !matchValue(want, it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType != capacityTypeSpot {
				continue
			}
			if z := q.Str("AvailabilityZone"); z != "" && z != o.Zone {
				continue
			}
			items = append(items, xmlSpotPrice{AvailabilityZone: o.Zone, InstanceType: it.Name,
				ProductDescription: "Linux/UNIX", SpotPrice: strconv.FormatFloat(o.Price, 'f', 6, 64), Timestamp: now})
		}
	}
	start, end, next := paginate(len(items), q, 1000)
	return &describeSpotPriceHistoryResponse{RequestID: uuid.NewString(), Prices: items[start:end], NextToken: next}, nil
}

func (e *EC2) describeSubnets(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := q.Strings("SubnetId")
	resp := &describeSubnetsResponse{RequestID: uuid.NewString()}
	for _, s := range e.subnets {
		if len(ids) > 0 && !matchValue(ids, s.ID) {
			continue
		}
		if !matchFilters(q.Filters(), s.Tags, map[string]string{"subnet-id": s.ID, filterAvailabilityZone: s.Zone, "vpc-id": e.vpcID,
			filterState: string(ec2types.SubnetStateAvailable)}) {
			continue
		}
		resp.Subnets = append(resp.Subnets, xmlSubnet{SubnetID: s.ID, VpcID: e.vpcID, AvailabilityZone: s.Zone,
			AvailabilityZoneID: s.ZoneID, AvailableIPAddressCount: s.AvailableIPs, CidrBlock: s.CIDRPrefix + "0/20",
			State: string(ec2types.SubnetStateAvailable), Tags: tagSet(s.Tags)})
	}
	return resp, nil
}

func (e *EC2) describeSecurityGroups(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := q.Strings("GroupId")
	resp := &describeSecurityGroupsResponse{RequestID: uuid.NewString()}
	for _, g := range e.securityGroups {
		if len(ids) > 0 && !matchValue(ids, g.ID) {
			continue
		}
		if !matchFilters(q.Filters(), g.Tags, map[string]string{"group-id": g.ID, "group-name": g.Name, "vpc-id": e.vpcID}) {
			continue
		}
		resp.Groups = append(resp.Groups, xmlSecurityGroup{GroupID: g.ID, GroupName: g.Name, GroupDescription: g.Name,
			VpcID: e.vpcID, OwnerID: e.accountID, Tags: tagSet(g.Tags)})
	}
	return resp, nil
}

func (e *EC2) describeImages(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := q.Strings("ImageId")
	owners := q.Strings("Owner")
	resp := &describeImagesResponse{RequestID: uuid.NewString()}
	for _, img := range e.images {
		if len(ids) > 0 && !matchValue(ids, img.ID) {
			continue
		}
		if len(owners) > 0 && !matchValue(owners, img.OwnerID) && !(matchValue(owners, "amazon") && img.OwnerID == amazonAccount) &&
			!(matchValue(owners, "self") && img.OwnerID == e.accountID) {
			continue
		}
		if !matchFilters(q.Filters(), img.Tags, map[string]string{"image-id": img.ID, "name": img.Name,
			"architecture": ec2Arch(img.Architecture), filterState: string(ec2types.ImageStateAvailable), "owner-id": img.OwnerID}) {
			continue
		}
		resp.Images = append(resp.Images, xmlImage{ImageID: img.ID, Name: img.Name, Architecture: ec2Arch(img.Architecture),
			OwnerID: img.OwnerID, CreationDate: isoTime(img.Created), State: string(ec2types.ImageStateAvailable), Tags: tagSet(img.Tags)})
	}
	return resp, nil
}

// Names of Describe filters several resources take.
const (
	filterInstanceID       = "instance-id"
	filterInstanceType     = "instance-type"
	filterAvailabilityZone = "availability-zone"
	filterState            = "state"
)

// matchFilters applies Describe filters: tag filters against tags, others against attrs; an unknown filter name
// matches nothing, as EC2 rejects it.
func matchFilters(filters []filter, tags, attrs map[string]string) bool {
	for _, f := range filters {
		if ok, handled := matchTagFilter(f, tags); handled {
			if !ok {
				return false
			}
			continue
		}
		v, known := attrs[f.Name]
		if !known || !matchValue(f.Values, v) {
			return false
		}
	}
	return true
}

// sortOverrides orders fleet overrides as the allocation strategy tries them: by price (cheapest first) for
// lowest-price and price-capacity-optimized, by priority (lowest number first, then price) for prioritized and
// capacity-optimized-prioritized.
func sortOverrides(os []fleetOverride, prioritized bool) {
	sort.SliceStable(os, func(i, j int) bool {
		if prioritized && os[i].priority != os[j].priority {
			return os[i].priority < os[j].priority
		}
		return os[i].price < os[j].price
	})
}
