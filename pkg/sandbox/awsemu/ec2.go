package awsemu

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// InstanceHooks are called (outside the emulator's lock) when an emulated instance changes state; the sandbox
// uses them to register and remove Nodes as kubelets and the cloud node controller would.
type InstanceHooks struct {
	Running    func(*Instance)
	Terminated func(*Instance)
}

// EC2 is the emulated EC2 service of one region.
type EC2 struct {
	region    string
	accountID string
	vpcID     string
	clock     clock.WithDelayedExecution

	mu             sync.Mutex
	catalog        catalogIndex
	instanceTypes  []catalog.InstanceType
	subnets        []*Subnet
	securityGroups []*SecurityGroup
	images         []*Image
	templates      map[string]*LaunchTemplate // by name
	instances      map[string]*Instance
	order          []string                        // instance ids, launch order
	fleets         map[string]*createFleetResponse // by client token
	capacity       map[string]int                  // remaining instances per pool; absent = unlimited
	nextID         int
	hooks          InstanceHooks
	// PendingDuration and ShuttingDownDuration are how long instances stay pending and shutting-down.
	pendingDuration, shuttingDownDuration time.Duration
	calls                                 map[string]int
	lastRequests                          map[string]url.Values
}

func newEC2(region, accountID string, cat *catalog.File, clk clock.WithDelayedExecution) *EC2 {
	e := &EC2{
		region: region, accountID: accountID, vpcID: "vpc-0sandbox0000001", clock: clk,
		catalog: indexCatalog(cat), instanceTypes: cat.InstanceTypes,
		templates: map[string]*LaunchTemplate{}, instances: map[string]*Instance{},
		fleets: map[string]*createFleetResponse{}, capacity: map[string]int{}, calls: map[string]int{},
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
			Tags: map[string]string{"karpenter.sh/discovery": clusterName, "Name": clusterName + "-private-" + z,
				"kubernetes.io/role/internal-elb": "1"},
		})
	}
	e.securityGroups = append(e.securityGroups,
		&SecurityGroup{ID: "sg-0nodes00000000001", Name: clusterName + "-node",
			Tags: map[string]string{"karpenter.sh/discovery": clusterName, "Name": clusterName + "-node"}},
		&SecurityGroup{ID: "sg-0cluster000000001", Name: "eks-cluster-sg-" + clusterName,
			Tags: map[string]string{"aws:eks:cluster-name": clusterName, "kubernetes.io/cluster/" + clusterName: "owned"}},
	)
}

func (e *EC2) newID(prefix string) string {
	e.nextID++
	return fmt.Sprintf("%s-0%016x", prefix, 0x5e7ed0000+e.nextID)
}

// handle serves one EC2 Query request. The caller holds no lock.
func (e *EC2) handle(w http.ResponseWriter, q *query, form url.Values) {
	action := q.Str("Action")
	e.mu.Lock()
	e.calls[action]++
	e.lastRequests[action] = form
	e.mu.Unlock()
	if v := q.Str("Version"); v != "2016-11-15" {
		writeEC2Error(w, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("unsupported API version %q", v))
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
	case "CreateTags":
		resp, err = e.createTags(q)
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
	end = min(n, start+limit)
	if start > n {
		start = n
	}
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
			case "instance-type":
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
			UsageClasses: []string{"on-demand", "spot"}}
		info.ProcessorInfo.Architectures = []string{ec2Arch(it.Architecture)}
		info.VCPUInfo.DefaultVCPUs = it.VCPU
		info.MemoryInfo.SizeInMiB = it.MemoryMiB
		enis, ips := it.ENIs, it.IPv4PerENI
		if enis == 0 {
			// a catalog that gives maxPods only: present ENIs that yield it (1 ENI of maxPods-1+... addresses)
			enis, ips = 1, it.MaxPods-1+1
		}
		info.NetworkInfo.MaximumNetworkInterfaces = enis
		info.NetworkInfo.IPv4AddressesPerInterface = ips
		items = append(items, info)
	}
	start, end, next := paginate(len(items), q, 100)
	return &describeInstanceTypesResponse{RequestID: uuid.NewString(), InstanceTypes: items[start:end], NextToken: next}, nil
}

func ec2Arch(arch string) string {
	if arch == "amd64" {
		return "x86_64"
	}
	return arch
}

func (e *EC2) describeInstanceTypeOfferings(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if lt := q.Str("LocationType"); lt != "" && lt != "availability-zone" {
		return nil, invalid("InvalidParameterValue", "LocationType %q is not supported by the emulator", lt)
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
				case "instance-type":
					match = match && matchValue(f.Values, it.Name)
				case "location":
					match = match && matchValue(f.Values, z)
				}
			}
			if match {
				items = append(items, xmlInstanceTypeOffering{InstanceType: it.Name, LocationType: "availability-zone", Location: z})
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
			if o.CapacityType != "spot" {
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
		if !matchFilters(q.Filters(), s.Tags, map[string]string{"subnet-id": s.ID, "availability-zone": s.Zone, "vpc-id": e.vpcID, "state": "available"}) {
			continue
		}
		resp.Subnets = append(resp.Subnets, xmlSubnet{SubnetID: s.ID, VpcID: e.vpcID, AvailabilityZone: s.Zone,
			AvailabilityZoneID: s.ZoneID, AvailableIPAddressCount: s.AvailableIPs, CidrBlock: s.CIDRPrefix + "0/20",
			State: "available", Tags: tagSet(s.Tags)})
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
			"architecture": ec2Arch(img.Architecture), "state": "available", "owner-id": img.OwnerID}) {
			continue
		}
		resp.Images = append(resp.Images, xmlImage{ImageID: img.ID, Name: img.Name, Architecture: ec2Arch(img.Architecture),
			OwnerID: img.OwnerID, CreationDate: isoTime(img.Created), State: "available", Tags: tagSet(img.Tags)})
	}
	return resp, nil
}

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

func (e *EC2) createLaunchTemplate(q *query) (any, *apiError) {
	name := q.Str("LaunchTemplateName")
	if name == "" {
		return nil, invalid("MissingParameter", "LaunchTemplateName is required")
	}
	d := q.Get("LaunchTemplateData")
	data := LaunchTemplateData{
		ImageID:                 d.Str("ImageId"),
		InstanceProfile:         d.Str("IamInstanceProfile.Name"),
		SecurityGroupIDs:        d.Strings("SecurityGroupId"),
		HTTPTokens:              d.Str("MetadataOptions.HttpTokens"),
		HTTPPutResponseHopLimit: d.Int("MetadataOptions.HttpPutResponseHopLimit", 1),
		HTTPEndpoint:            d.Str("MetadataOptions.HttpEndpoint"),
		Tags:                    map[string]map[string]string{},
	}
	if data.HTTPTokens == "" {
		data.HTTPTokens = "optional" // EC2's own default, which Stevedore must override
	}
	if ud := d.Str("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, invalid("InvalidUserData.Malformed", "user data is not valid base64: %v", err)
		}
		data.UserData = string(raw)
	}
	for _, bd := range d.List("BlockDeviceMapping") {
		data.BlockDevices = append(data.BlockDevices, BlockDevice{DeviceName: bd.Str("DeviceName"),
			VolumeSize: bd.Int("Ebs.VolumeSize", 0), VolumeType: bd.Str("Ebs.VolumeType"), Encrypted: bd.Bool("Ebs.Encrypted", false)})
	}
	for _, rt := range []string{"instance", "volume", "network-interface"} {
		if tags := d.tagSpecs(rt); len(tags) > 0 {
			data.Tags[rt] = tags
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if data.ImageID != "" && e.findImage(data.ImageID) == nil {
		return nil, invalid("InvalidAMIID.NotFound", "the image id '[%s]' does not exist", data.ImageID)
	}
	if _, exists := e.templates[name]; exists {
		return nil, invalid("InvalidLaunchTemplateName.AlreadyExistsException", "launch template name already in use")
	}
	lt := &LaunchTemplate{ID: e.newID("lt"), Name: name, Created: e.clock.Now(), Tags: q.tagSpecs("launch-template"), Data: data}
	e.templates[name] = lt
	return &createLaunchTemplateResponse{RequestID: uuid.NewString(), LaunchTemplate: xmlTemplate(lt)}, nil
}

func xmlTemplate(lt *LaunchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, CreateTime: isoTime(lt.Created),
		CreatedBy: "arn:aws:iam::" + "000000000000" + ":role/stevedore", DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: tagSet(lt.Tags)}
}

func (e *EC2) findImage(id string) *Image {
	for _, img := range e.images {
		if img.ID == id {
			return img
		}
	}
	return nil
}

func (e *EC2) describeLaunchTemplates(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	names, ids := q.Strings("LaunchTemplateName"), q.Strings("LaunchTemplateId")
	var items []xmlLaunchTemplate
	for _, name := range sortedKeys(e.templates) {
		lt := e.templates[name]
		if len(names) > 0 && !matchValue(names, lt.Name) || len(ids) > 0 && !matchValue(ids, lt.ID) {
			continue
		}
		if !matchFilters(q.Filters(), lt.Tags, map[string]string{"launch-template-name": lt.Name}) {
			continue
		}
		items = append(items, xmlTemplate(lt))
	}
	if len(names) > 0 && len(items) == 0 {
		return nil, invalid("InvalidLaunchTemplateName.NotFoundException", "at least one of the launch templates specified in the request does not exist")
	}
	start, end, next := paginate(len(items), q, 200)
	return &describeLaunchTemplatesResponse{RequestID: uuid.NewString(), LaunchTemplates: items[start:end], NextToken: next}, nil
}

func (e *EC2) deleteLaunchTemplate(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, lt := range e.templates {
		if lt.Name == q.Str("LaunchTemplateName") || lt.ID == q.Str("LaunchTemplateId") {
			delete(e.templates, name)
			return &deleteLaunchTemplateResponse{RequestID: uuid.NewString(), LaunchTemplate: xmlTemplate(lt)}, nil
		}
	}
	return nil, invalid("InvalidLaunchTemplateName.NotFoundException", "the specified launch template does not exist")
}

func (e *EC2) createTags(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tags := map[string]string{}
	for _, t := range q.List("Tag") {
		tags[t.Str("Key")] = t.Str("Value")
	}
	for _, id := range q.Strings("ResourceId") {
		if inst, ok := e.instances[id]; ok {
			for k, v := range tags {
				inst.Tags[k] = v
			}
			continue
		}
		if strings.HasPrefix(id, "i-") {
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	return &createTagsResponse{RequestID: uuid.NewString(), Return: true}, nil
}

func (e *EC2) describeInstances(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := q.Strings("InstanceId")
	for _, id := range ids {
		if _, ok := e.instances[id]; !ok {
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	var matched []*Instance
	for _, id := range e.order {
		inst := e.instances[id]
		if len(ids) > 0 && !matchValue(ids, inst.ID) {
			continue
		}
		if !matchFilters(q.Filters(), inst.Tags, map[string]string{"instance-id": inst.ID, "instance-state-name": inst.State,
			"instance-type": inst.Type, "availability-zone": inst.Zone, "private-dns-name": inst.PrivateDNSName,
			"instance-lifecycle": lifecycle(inst.CapacityType), "subnet-id": inst.SubnetID}) {
			continue
		}
		matched = append(matched, inst)
	}
	start, end, next := paginate(len(matched), q, 1000)
	resp := &describeInstancesResponse{RequestID: uuid.NewString(), NextToken: next}
	for _, inst := range matched[start:end] {
		resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: "r-" + inst.ID[2:], OwnerID: e.accountID,
			Instances: []xmlInstance{e.xmlInstance(inst)}})
	}
	return resp, nil
}

func lifecycle(capacityType string) string {
	if capacityType == "spot" {
		return "spot"
	}
	return ""
}

func (e *EC2) xmlInstance(inst *Instance) xmlInstance {
	x := xmlInstance{InstanceID: inst.ID, ImageID: inst.ImageID, State: xmlState{stateCodes[inst.State], inst.State},
		PrivateDNSName: inst.PrivateDNSName, InstanceType: inst.Type, LaunchTime: isoTime(inst.LaunchTime),
		SubnetID: inst.SubnetID, VpcID: e.vpcID, PrivateIPAddress: inst.PrivateIP, Architecture: ec2Arch(inst.Architecture),
		InstanceLifecycle: lifecycle(inst.CapacityType), ClientToken: inst.ClientToken, Tags: tagSet(inst.Tags)}
	x.Placement.AvailabilityZone = inst.Zone
	x.MetadataOptions.HTTPTokens = inst.LaunchTemplate.HTTPTokens
	x.MetadataOptions.HTTPPutResponseHopLimit = inst.LaunchTemplate.HTTPPutResponseHopLimit
	x.MetadataOptions.HTTPEndpoint = "enabled"
	if inst.StateReason != "" {
		x.StateReason = &struct {
			Code    string `xml:"code"`
			Message string `xml:"message"`
		}{Code: inst.StateReason, Message: inst.StateReason}
	}
	return x
}

func (e *EC2) terminateInstances(q *query) (any, *apiError) {
	ids := q.Strings("InstanceId")
	if len(ids) == 0 {
		return nil, invalid("MissingParameter", "InstanceId is required")
	}
	e.mu.Lock()
	resp := &terminateInstancesResponse{RequestID: uuid.NewString()}
	for _, id := range ids {
		if _, ok := e.instances[id]; !ok {
			e.mu.Unlock()
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	for _, id := range ids {
		inst := e.instances[id]
		prev := inst.State
		if prev != "terminated" && prev != "shutting-down" {
			e.beginTermination(inst, "Client.UserInitiatedShutdown")
		}
		resp.Instances = append(resp.Instances, xmlStateChange{InstanceID: id,
			CurrentState: xmlState{stateCodes[inst.State], inst.State}, PreviousState: xmlState{stateCodes[prev], prev}})
	}
	e.mu.Unlock()
	return resp, nil
}

// beginTermination moves an instance to shutting-down, and to terminated after shuttingDownDuration. Caller
// holds e.mu.
func (e *EC2) beginTermination(inst *Instance, reason string) {
	inst.State = "shutting-down"
	inst.StateReason = reason
	id := inst.ID
	e.clock.AfterFunc(e.shuttingDownDuration, func() {
		e.mu.Lock()
		inst := e.instances[id]
		if inst == nil || inst.State != "shutting-down" {
			e.mu.Unlock()
			return
		}
		inst.State = "terminated"
		e.releaseCapacity(inst)
		snapshot, hook := inst.clone(), e.hooks.Terminated
		e.mu.Unlock()
		if hook != nil {
			hook(snapshot)
		}
	})
}

// releaseCapacity gives an instance's slot back to its pool. Caller holds e.mu.
func (e *EC2) releaseCapacity(inst *Instance) {
	key := offeringKey(inst.Type, inst.Zone, inst.CapacityType)
	if n, limited := e.capacity[key]; limited {
		e.capacity[key] = n + 1
	}
}

// Instances returns a snapshot of every instance, in launch order.
func (e *EC2) Instances() []*Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Instance, 0, len(e.order))
	for _, id := range e.order {
		out = append(out, e.instances[id].clone())
	}
	return out
}

// Instance returns a snapshot of one instance, or nil.
func (e *EC2) Instance(id string) *Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	if inst, ok := e.instances[id]; ok {
		return inst.clone()
	}
	return nil
}

// SetCapacity limits how many more instances a pool (type, zone, capacity type) can launch; a negative n removes
// the limit. A pool at 0 answers InsufficientInstanceCapacity.
func (e *EC2) SetCapacity(instanceType, zone, capacityType string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := offeringKey(instanceType, zone, capacityType)
	if n < 0 {
		delete(e.capacity, key)
		return
	}
	e.capacity[key] = n
}

// RunInstance adds a running instance directly, as something outside Stevedore would (for tests of ownership and
// garbage collection). Tags decide who owns it.
func (e *EC2) RunInstance(instanceType, zone string, tags map[string]string) *Instance {
	e.mu.Lock()
	inst := e.newInstance(instanceType, zone, "on-demand", "", tags, LaunchTemplateData{}, "")
	inst.State = "running"
	snapshot, hook := inst.clone(), e.hooks.Running
	e.mu.Unlock()
	_ = hook // instances created outside a fleet register no node
	return snapshot
}

// newInstance creates a pending instance. Caller holds e.mu.
func (e *EC2) newInstance(instanceType, zone, capacityType, subnetID string, tags map[string]string, lt LaunchTemplateData, clientToken string) *Instance {
	var subnet *Subnet
	for _, s := range e.subnets {
		if (subnetID != "" && s.ID == subnetID) || (subnetID == "" && s.Zone == zone) {
			subnet = s
			break
		}
	}
	ip := "10.0.250.1"
	if subnet != nil {
		subnet.nextHost++
		subnet.AvailableIPs--
		ip = fmt.Sprintf("%s%d", subnet.CIDRPrefix, subnet.nextHost%254+1)
		if subnet.nextHost >= 254 {
			// beyond one /24: use the next octet
			third := strings.Split(subnet.CIDRPrefix, ".")[2]
			n, _ := strconv.Atoi(third)
			ip = fmt.Sprintf("10.0.%d.%d", n+subnet.nextHost/254, subnet.nextHost%254+1)
		}
		subnetID = subnet.ID
	}
	it := e.catalog[instanceType]
	price, _ := e.catalog.price(instanceType, zone, capacityType)
	inst := &Instance{
		ID: e.newID("i"), Type: instanceType, Architecture: it.Architecture, Zone: zone, SubnetID: subnetID,
		ImageID: lt.ImageID, PrivateIP: ip, PrivateDNSName: privateDNSName(ip, e.region), CapacityType: capacityType,
		Price: price, State: "pending", LaunchTime: e.clock.Now(), Tags: cloneMap(tags), LaunchTemplate: lt, ClientToken: clientToken,
	}
	e.instances[inst.ID] = inst
	e.order = append(e.order, inst.ID)
	return inst
}

// startRunning moves a pending instance to running after pendingDuration and calls the Running hook.
func (e *EC2) startRunning(id string) {
	e.clock.AfterFunc(e.pendingDuration, func() {
		e.mu.Lock()
		inst := e.instances[id]
		if inst == nil || inst.State != "pending" {
			e.mu.Unlock()
			return
		}
		inst.State = "running"
		snapshot, hook := inst.clone(), e.hooks.Running
		e.mu.Unlock()
		if hook != nil {
			hook(snapshot)
		}
	})
}

// Interrupt takes an instance away as AWS does: it is terminated with the given reason (the SQS notice is sent
// separately by the caller).
func (e *EC2) Interrupt(id, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, ok := e.instances[id]
	if !ok {
		return fmt.Errorf("instance %s does not exist", id)
	}
	if inst.State == "running" || inst.State == "pending" {
		e.beginTermination(inst, reason)
	}
	return nil
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sortOverrides orders fleet overrides by price (cheapest first), the lowest-price strategy.
func sortOverrides(os []fleetOverride) {
	sort.SliceStable(os, func(i, j int) bool { return os[i].price < os[j].price })
}
