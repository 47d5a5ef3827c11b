/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// override is one (instance type, subnet) a fleet may launch; image is the key of the AMI it needs (imageKey:
// its architecture, and its variant for GPU and Neuron types), so a NodeClaim whose types need different images
// gets one launch template for each.
type override struct {
	instanceType, image, zone, subnetID string
	price                               float64
	// reservation and reservationType of a reserved offering ("" otherwise)
	reservation, reservationType string
	// prioritized: the fleet tries the overrides in the order given (the NodeClaim's, priced by NodeOverlays),
	// not by EC2's prices
	prioritized bool
	// efa is how many EFA interfaces the launch template attaches: the type's maximum when the NodeClaim's pods
	// request vpc.amazonaws.com/efa, else none
	efa int32
}

// templateKey is the launch template an override needs: one per image, per EFA interface count and, for reserved
// offerings, per reservation (the template targets it).
func (o override) templateKey() string {
	key := o.image
	if o.efa > 0 {
		key += fmt.Sprintf("|efa=%d", o.efa)
	}
	if o.reservation != "" {
		key += "|" + o.reservation + "|" + o.reservationType
	}
	return key
}

// Create launches an instance for the NodeClaim with CreateFleet (type instant). Before launching it looks for an
// instance already tagged with the NodeClaim's name, so a restart between a launch and the NodeClaim's status
// update adopts the instance instead of launching another.
func (p *Provider) Create(ctx context.Context, claim *stevedorev1.NodeClaim) (*cloud.Instance, error) {
	logger := klog.FromContext(ctx).WithValues("nodeclaim", claim.Name)
	nc, res, err := p.readyClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	if existing, err := p.findByClaim(ctx, claim.Name); err != nil {
		return nil, err
	} else if existing != nil {
		logger.Info("Adopting the instance already launched for the NodeClaim", "instance", existing.ID)
		return existing, nil
	}
	reqs, err := claimRequirements(claim)
	if err != nil {
		return nil, err
	}
	var result fleetResult
	capacityType := ""
	for skipReserved := false; ; skipReserved = true {
		var overrides []override
		overrides, capacityType, err = p.overrides(ctx, claim, nc, res, reqs, skipReserved)
		if err != nil {
			return nil, err
		}
		if result, err = p.launchFleet(ctx, claim, nc, res, overrides, capacityType); err != nil {
			return nil, err
		}
		if capacityType == stevedorev1.CapacityTypeReserved {
			p.discovery.forget() // the reservation's room changed, or it refused: describe it again
		}
		if result.instanceID != "" || capacityType != stevedorev1.CapacityTypeReserved {
			break
		}
		logger.Info("Reserved capacity refused the launch; trying the NodeClaim's other capacity types", "errors", len(result.errors))
	}
	if result.instanceID == "" {
		return nil, launchFailure(result.errors, capacityType)
	}
	inst, err := p.Get(ctx, result.instanceID)
	if err != nil {
		return nil, fmt.Errorf("describing launched instance %s: %w", result.instanceID, err)
	}
	inst.Tags[TagNodeClaim] = claim.Name
	return inst, nil
}

// launchFleet launches one CreateFleet over the overrides, with a launch template for each image and reservation
// they use; the offerings that answered with no capacity are marked unavailable.
func (p *Provider) launchFleet(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, res *Resolved,
	overrides []override, capacityType string) (fleetResult, error) {
	templates := map[string]string{}
	for _, o := range overrides {
		if _, ok := templates[o.templateKey()]; ok {
			continue
		}
		name, err := p.ensureLaunchTemplate(ctx, claim, nc, res, o)
		if err != nil {
			return fleetResult{}, err
		}
		templates[o.templateKey()] = name
	}
	placement, err := p.placementFor(ctx, claim, nc, res)
	if err != nil {
		return fleetResult{}, err
	}
	req := p.fleetRequest(claim, nc, overrides, templates, capacityType, placement)
	if id, size, ok := claim.LaunchGroup(); ok && size > 1 && (capacityType == stevedorev1.CapacityTypeOnDemand || capacityType == stevedorev1.CapacityTypeSpot) {
		// a gang's NodeClaims of one shape: one all-or-nothing fleet (reserved capacity is counted per
		// reservation, and launches alone; the provisioner rolls a short gang back)
		req.group, req.groupSize = id, size
	}
	result, err := p.fleets.launch(ctx, req)
	if err != nil {
		return fleetResult{}, classifyLaunchError(err)
	}
	for _, e := range result.errors {
		if capacityErrorCodes[e.code] {
			p.unavailable.Mark(e.instanceType, e.zone, reservationKey(capacityType, overrides, e))
		}
	}
	return result, nil
}

// claimRequirements reads a NodeClaim's requirements.
func claimRequirements(claim *stevedorev1.NodeClaim) (scheduling.Requirements, error) {
	var nsr []corev1.NodeSelectorRequirement
	for _, r := range claim.Spec.Requirements {
		nsr = append(nsr, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
	return scheduling.FromNodeSelectorRequirements(nsr...)
}

// instanceTypeOrder returns the NodeClaim's instance types in the order it lists them (cheapest first).
func instanceTypeOrder(claim *stevedorev1.NodeClaim) []string {
	for _, r := range claim.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && (r.Operator == "In" || r.Operator == "") {
			return r.Values
		}
	}
	return nil
}

// overrides lists the offerings the fleet may use, cheapest first, capped at MaxInstanceTypes types, and picks
// the capacity type: reserved when the NodeClaim allows it and a reservation has room (unless skipReserved),
// else spot when allowed and available, else on-demand. Reserved overrides are those of one reservation type
// (a fleet launches On-Demand Capacity Reservations and Capacity Blocks with different target capacity types).
func (p *Provider) overrides(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, res *Resolved, reqs scheduling.Requirements,
	skipReserved bool) ([]override, string, error) {
	order, byName, err := p.launchableTypes(ctx, claim, nc, res, reqs)
	if err != nil {
		return nil, "", err
	}
	for _, ct := range []string{stevedorev1.CapacityTypeReserved, stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand} {
		if !reqs.Get(stevedorev1.LabelCapacityType).Has(ct) || (ct == stevedorev1.CapacityTypeReserved && skipReserved) {
			continue
		}
		typed := reqs.Clone()
		typed.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, ct))
		out := p.offeringOverrides(order, byName, typed, res, requestsEFA(claim))
		if len(out) == 0 {
			continue
		}
		if claim.Annotations[stevedorev1.AnnotationLaunchOrder] == stevedorev1.LaunchOrderListed {
			return listedOrder(out, order), ct, nil
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].price < out[j].price })
		if ct == stevedorev1.CapacityTypeReserved {
			out = sameReservationType(out)
		}
		return out, ct, nil
	}
	return nil, "", &cloud.InsufficientCapacityError{Tried: []string{"no available offering matches the NodeClaim's instance types, zones and capacity types"}}
}

// launchableTypes returns the instance types the NodeClaim may launch, in its order (the NodeClaim's list, cheapest
// first; without one, every type its requirements allow), and by name, with the node class's images and the
// reservations found.
func (p *Provider) launchableTypes(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, res *Resolved,
	reqs scheduling.Requirements) ([]string, map[string]*cloud.InstanceType, error) {
	order := instanceTypeOrder(claim)
	var only map[string]bool
	if len(order) > 0 {
		only = make(map[string]bool, len(order))
		for _, name := range order {
			only[name] = true
		}
	}
	its, err := p.copiedTypes(p.catalog.get(ctx), nc, res, only)
	if err != nil {
		return nil, nil, err
	}
	its = p.withReservations(its, res.Reservations)
	byName := map[string]*cloud.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	if len(order) == 0 {
		for _, it := range its {
			if reqs.Compatible(it.Requirements, nil) == nil {
				order = append(order, it.Name)
			}
		}
	}
	return order, byName, nil
}

// requestsEFA reports whether the NodeClaim's pods request EFA interfaces (vpc.amazonaws.com/efa).
func requestsEFA(claim *stevedorev1.NodeClaim) bool {
	q, ok := claim.Spec.Resources.Requests[stevedorev1.ResourceEFA]
	return ok && q.Sign() > 0
}

// efaInterfaces is how many EFA interfaces an instance of the type attaches when its pods request EFA: all it can
// take, so that the node's EFA device plugin advertises the capacity the plan counted for the type.
func efaInterfaces(it *cloud.InstanceType) int32 {
	q := it.Capacity[stevedorev1.ResourceEFA]
	return clampInt32(q.Value())
}

// offeringOverrides lists, type by type in order, the offerings typed allows in a zone the node class has a subnet
// in, up to MaxInstanceTypes types; with efa, each with the type's EFA interfaces.
func (p *Provider) offeringOverrides(order []string, byName map[string]*cloud.InstanceType, typed scheduling.Requirements, res *Resolved,
	efa bool) []override {
	var out []override
	types := 0
	for _, name := range order {
		it, ok := byName[name]
		if !ok {
			continue
		}
		added := false
		for _, o := range it.Offerings.Compatible(typed) {
			subnet, ok := res.SubnetFor(o.Zone)
			if !ok {
				continue
			}
			arch := it.Requirements.Get(corev1.LabelArchStable).Any()
			ov := override{instanceType: it.Name, image: imageKey(arch, it.ImageVariant()), zone: o.Zone, subnetID: subnet.ID, price: o.Price,
				reservation: o.ReservationID, reservationType: o.ReservationType}
			if efa {
				ov.efa = efaInterfaces(it)
			}
			out = append(out, ov)
			added = true
		}
		if added {
			types++
			if types == p.opts.MaxInstanceTypes {
				break
			}
		}
	}
	return out
}

// listedOrder prioritizes the overrides in the NodeClaim's order: it lists its types cheapest first by prices
// NodeOverlays changed, so EC2 must follow that order, type by type, cheapest zone first within a type.
func listedOrder(out []override, order []string) []override {
	rank := map[string]int{}
	for i, name := range order {
		rank[name] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank[out[i].instanceType], rank[out[j].instanceType]; ri != rj {
			return ri < rj
		}
		return out[i].price < out[j].price
	})
	for i := range out {
		out[i].prioritized = true
	}
	return out
}

// sameReservationType keeps the reserved overrides of the cheapest one's reservation type.
func sameReservationType(out []override) []override {
	kept := out[:0:0]
	for _, o := range out {
		if o.reservationType == out[0].reservationType {
			kept = append(kept, o)
		}
	}
	return kept
}

// reservationKey is the unavailable-offerings cache's capacity key of a failed override: its capacity type, or for
// a reserved launch "reserved/<reservation id>" of the override the error names.
func reservationKey(capacityType string, overrides []override, e fleetError) string {
	if capacityType != stevedorev1.CapacityTypeReserved {
		return capacityType
	}
	for _, o := range overrides {
		if o.instanceType == e.instanceType && o.zone == e.zone {
			return cloud.Offering{CapacityType: capacityType, ReservationID: o.reservation}.CacheKey()
		}
	}
	return capacityType
}

// fleetRequest builds the CreateFleet input. The tags common to every instance of the NodePool are set here; the
// NodeClaim's own tag is added after launch, so identical requests can share one call.
func (p *Provider) fleetRequest(claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, overrides []override, templates map[string]string,
	capacityType, placementGroup string) fleetRequest {
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for _, key := range sortedKeysOf(templates) {
		cfg := ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
			LaunchTemplateName: aws.String(templates[key]), Version: aws.String("$Latest")}}
		for i, o := range overrides {
			if o.templateKey() == key {
				ov := ec2types.FleetLaunchTemplateOverridesRequest{
					InstanceType: ec2types.InstanceType(o.instanceType), SubnetId: aws.String(o.subnetID), AvailabilityZone: aws.String(o.zone)}
				if placementGroup != "" {
					ov.Placement = &ec2types.Placement{GroupName: aws.String(placementGroup)}
				}
				if o.prioritized {
					ov.Priority = aws.Float64(float64(i)) // the order of the overrides, across launch templates
				}
				cfg.Overrides = append(cfg.Overrides, ov)
			}
		}
		configs = append(configs, cfg)
	}
	target := ec2types.DefaultTargetCapacityType(capacityType)
	if capacityType == stevedorev1.CapacityTypeReserved {
		// a reservation takes on-demand launches its template targets; a Capacity Block its own capacity type
		target = ec2types.DefaultTargetCapacityTypeOnDemand
		if overrides[0].reservationType == stevedorev1.ReservationTypeCapacityBlock {
			target = ec2types.DefaultTargetCapacityTypeCapacityBlock
		}
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			DefaultTargetCapacityType: target, TotalTargetCapacity: aws.Int32(1)},
		// the fleet too: the controller policy allows CreateFleet only for a fleet tagged for the cluster
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: toEC2Tags(p.commonTags(claim, nc))},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: toEC2Tags(p.commonTags(claim, nc))},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: toEC2Tags(p.commonTags(claim, nc))}},
	}
	prioritized := overrides[0].prioritized
	switch {
	case capacityType == stevedorev1.CapacityTypeSpot && prioritized:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized}
	case capacityType == stevedorev1.CapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case prioritized:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized}
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return fleetRequest{input: in, claim: claim.Name, nodePool: claim.Labels[stevedorev1.LabelNodePool], overrides: overrides}
}

// commonTags are the tags of every resource launched for a NodePool: ownership, NodePool, EKS cluster name and the
// node class's own tags.
func (p *Provider) commonTags(claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[OwnershipTag(p.opts.ClusterName)] = ownedTagValue
	tags[TagEKSClusterName] = p.opts.ClusterName
	tags[TagNodePool] = claim.Labels[stevedorev1.LabelNodePool]
	return tags
}

func toEC2Tags(tags map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for _, k := range sortedKeysOf(tags) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// findByClaim returns a live instance tagged with the NodeClaim's name, if one exists.
func (p *Provider) findByClaim(ctx context.Context, claimName string) (*cloud.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + OwnershipTag(p.opts.ClusterName)), Values: []string{ownedTagValue}},
		{Name: aws.String("tag:" + TagNodeClaim), Values: []string{claimName}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("looking for an instance of NodeClaim %s: %w", claimName, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			return p.instance(i), nil
		}
	}
	return nil, nil
}

// ensureLaunchTemplate returns the name of the launch template for a node class, NodePool labels and taints and
// the AMI of an image key (architecture, and variant for GPU and Neuron types), creating it if needed. Templates
// are named by a hash of their content and reused.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, res *Resolved, o override) (string, error) {
	image := o.image
	arch, variant, _ := strings.Cut(image, "/")
	ami, ok := ImageFor(res.AMIs, arch, variant)
	if !ok {
		return "", &cloud.NodeClassNotReadyError{Name: nc.Name, Reason: "no AMI for " + image}
	}
	userData, err := p.bootstrap(claim, nc).Render(nc.AMIFamilyOrDefault())
	if err != nil {
		return "", err
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(ami.ID),
		UserData:            aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(res.InstanceProfile)},
		MetadataOptions:     metadataOptions(nc),
		BlockDeviceMappings: blockDevices(nc),
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring)},
		// the network interfaces a launch creates carry the cluster's tags too: the controller policy allows
		// ec2:RunInstances on a network interface only with them (CreateOnlyResourcesTaggedForTheCluster)
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: toEC2Tags(p.commonTags(claim, nc))},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: toEC2Tags(p.commonTags(claim, nc))},
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: toEC2Tags(p.commonTags(claim, nc))},
		},
	}
	if o.efa > 0 {
		data.NetworkInterfaces = efaNetworkInterfaces(nc, res.SecurityGroupIDs, o.efa)
	} else if ni := primaryInterface(nc, res.SecurityGroupIDs); ni != nil {
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{*ni}
	} else {
		data.SecurityGroupIds = res.SecurityGroupIDs
	}
	if o.reservation != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(o.reservation)}}
		if o.reservationType == stevedorev1.ReservationTypeCapacityBlock {
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		}
	}
	raw, _ := json.Marshal(data)
	sum := sha256.Sum256(raw)
	name := fmt.Sprintf("stevedore/%s/%s", p.opts.ClusterName, hex.EncodeToString(sum[:10]))
	p.ltMu.Lock()
	_, known := p.templates[name]
	p.templateUsed[name] = p.opts.Clock.Now()
	p.ltMu.Unlock()
	if known {
		return name, nil
	}
	_, err = p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if isLaunchTemplateNotFound(err) {
		tags := p.commonTags(claim, nc)
		delete(tags, TagNodePool)
		_, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: toEC2Tags(tags)}},
		})
		if isAlreadyExists(err) {
			err = nil
		}
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Created launch template", "launchTemplate", name, "ami", ami.ID, "image", image)
		}
	}
	if err != nil {
		return "", fmt.Errorf("launch template %s: %w", name, classifyLaunchError(err))
	}
	p.ltMu.Lock()
	p.templates[name] = name
	p.ltMu.Unlock()
	return name, nil
}

// primaryInterface is the node's primary network interface when the node class sets something of it (a public
// address, connection tracking), holding the security groups; nil otherwise (the security groups then go on the
// launch template itself). The fleet's override puts it in the subnet chosen.
func primaryInterface(nc *stevedorev1.EC2NodeClass, securityGroups []string) *ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	ct := nc.Spec.ConnectionTracking
	if nc.Spec.AssociatePublicIPAddress == nil && ct == nil {
		return nil
	}
	ni := &ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{DeviceIndex: aws.Int32(0), Groups: securityGroups,
		AssociatePublicIpAddress: nc.Spec.AssociatePublicIPAddress}
	if ct != nil {
		ni.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
			TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout}
	}
	return ni
}

// efaNetworkInterfaces are a node's network interfaces when its pods use EFA: count EFA interfaces, one on each
// network card from the first, the first of them the primary interface (device 0, with the node class's public
// address and connection tracking settings), the others device 1 of their cards. Each holds the security groups;
// the fleet's override puts them in the subnet chosen.
func efaNetworkInterfaces(nc *stevedorev1.EC2NodeClass, securityGroups []string, count int32) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	out := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 0, count)
	for card := range count {
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{DeviceIndex: aws.Int32(1), Groups: securityGroups}
		if card == 0 {
			if primary := primaryInterface(nc, securityGroups); primary != nil {
				ni = *primary
			}
			ni.DeviceIndex = aws.Int32(0)
		}
		ni.NetworkCardIndex = aws.Int32(card)
		ni.InterfaceType = aws.String(string(ec2types.NetworkInterfaceTypeEfa))
		out = append(out, ni)
	}
	return out
}

// bootstrap is what a node of the NodeClaim's NodePool needs to join: the NodePool's labels and taints (those
// that do not depend on the offering EC2 picks), and the unregistered taint Stevedore removes once it has synced
// the node.
func (p *Provider) bootstrap(claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass) Bootstrap {
	labels := kubeletLabels(claim.Labels)
	taints := []corev1.Taint{stevedorev1.UnregisteredTaint()}
	taints = append(taints, claim.Spec.Taints...)
	taints = append(taints, claim.Spec.StartupTaints...)
	ud := ""
	if nc.Spec.UserData != nil {
		ud = *nc.Spec.UserData
	}
	return Bootstrap{ClusterName: p.opts.ClusterName, ClusterEndpoint: p.opts.ClusterEndpoint, CABundle: p.opts.CABundle,
		ServiceCIDR: p.opts.ServiceCIDR, Labels: labels, Taints: taints, Kubelet: nc.Spec.Kubelet, UserData: ud,
		InstanceStoreRAID0: ptr.Deref(nc.Spec.InstanceStorePolicy, "") == stevedorev1.InstanceStorePolicyRAID0}
}

// kubeletLabels are the NodeClaim's labels a kubelet may register with: not the well-known ones that depend on the
// offering EC2 picks (Stevedore syncs those after registration) and nothing in the kubernetes.io or k8s.io
// namespaces, which the NodeRestriction admission plugin refuses from kubelets.
func kubeletLabels(claimLabels map[string]string) map[string]string {
	wellKnown := map[string]bool{}
	for _, k := range stevedorev1.WellKnownLabels() {
		wellKnown[k] = true
	}
	out := map[string]string{}
	for k, v := range claimLabels {
		if wellKnown[k] || k == stevedorev1.LabelNodeClaim {
			continue
		}
		if domain, _, ok := strings.Cut(k, "/"); ok && (strings.HasSuffix(domain, "kubernetes.io") || strings.HasSuffix(domain, "k8s.io")) {
			continue
		}
		out[k] = v
	}
	return out
}

func metadataOptions(nc *stevedorev1.EC2NodeClass) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	mo := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled, HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled,
		HttpPutResponseHopLimit: aws.Int32(1), HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
	}
	if m := nc.Spec.MetadataOptions; m != nil {
		if m.HTTPEndpoint != nil {
			mo.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
		}
		if m.HTTPProtocolIPv6 != nil {
			mo.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
		}
		if m.HTTPPutResponseHopLimit != nil {
			mo.HttpPutResponseHopLimit = aws.Int32(clampInt32(*m.HTTPPutResponseHopLimit))
		}
		if m.HTTPTokens != nil {
			mo.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
		}
	}
	return mo
}

// clampInt32 is v, or the bound of int32 it is beyond: EC2 takes these settings as int32, and rejects a value out
// of range rather than reading it wrapped around.
func clampInt32(v int64) int32 { return int32(max(min(v, math.MaxInt32), math.MinInt32)) }

func blockDevices(nc *stevedorev1.EC2NodeClass) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	mappings := nc.Spec.BlockDeviceMappings
	if len(mappings) == 0 {
		size := rootVolumeSize(nc)
		gp3 := "gp3"
		mappings = []stevedorev1.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), RootVolume: true,
			EBS: &stevedorev1.BlockDevice{VolumeSize: &size, VolumeType: &gp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}}
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, m := range mappings {
		bd := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if m.DeviceName == nil {
			bd.DeviceName = aws.String("/dev/xvda")
		}
		if e := m.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true), VolumeType: ec2types.VolumeTypeGp3}
			if e.VolumeSize != nil {
				ebs.VolumeSize = aws.Int32(clampInt32((e.VolumeSize.Value() + 1<<30 - 1) >> 30)) // GiB, rounded up
			}
			if e.VolumeType != nil {
				ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.Encrypted != nil {
				ebs.Encrypted = e.Encrypted
			}
			if e.DeleteOnTermination != nil {
				ebs.DeleteOnTermination = e.DeleteOnTermination
			}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(clampInt32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(clampInt32(*e.Throughput))
			}
			ebs.KmsKeyId, ebs.SnapshotId, ebs.VolumeInitializationRate = e.KMSKeyID, e.SnapshotID, e.VolumeInitializationRate
			bd.Ebs = ebs
		}
		out = append(out, bd)
	}
	return out
}

// classifyLaunchError turns errors only the user can fix into LaunchConfigurationErrors with a hint.
func classifyLaunchError(err error) error {
	code := errorCode(err)
	if hint, ok := configHints[code]; ok {
		return &cloud.LaunchConfigurationError{Code: code, Message: err.Error(), Hint: hint}
	}
	return err
}

// launchFailure explains why a fleet launched nothing.
func launchFailure(errs []fleetError, capacityType string) error {
	var tried []string
	for _, e := range errs {
		if hint, ok := configHints[e.code]; ok && !capacityErrorCodes[e.code] {
			return &cloud.LaunchConfigurationError{Code: e.code, Message: e.message, Hint: hint}
		}
		tried = append(tried, fmt.Sprintf("%s/%s/%s: %s", e.instanceType, e.zone, capacityType, e.code))
	}
	if len(tried) == 0 {
		return errors.New("CreateFleet launched nothing and reported no error")
	}
	return &cloud.InsufficientCapacityError{Tried: tried}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
