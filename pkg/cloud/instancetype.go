/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cloud

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// InstanceType is a type a node may be launched as, with what a node of it offers pods.
type InstanceType struct {
	Name string
	// Requirements describe the labels a node of this type has: single values for the type's own labels
	// (arch, os, instance-type, family...), the offered zones and capacity types.
	Requirements scheduling.Requirements
	// Capacity is what the node reports: cpu, memory (less the VM overhead), pods, ephemeral-storage.
	Capacity corev1.ResourceList
	// Overhead is subtracted from Capacity to give Allocatable.
	Overhead Overhead
	// Offerings are the (zone, capacity type) pairs with their prices.
	Offerings Offerings
	// PriceOverlaid is true when a NodeOverlay set the price of one of the offerings.
	PriceOverlaid bool

	allocatable corev1.ResourceList
	labels      map[string]string
	// fast holds allocatable cpu (millicores), memory (bytes) and pods as integers, fastAcc the accelerators.
	fast      [3]int64
	fastAcc   AcceleratorCounts
	fastAccN  int64
	fastValid bool
	// accelerated is true when the type has GPUs or Neuron devices.
	accelerated bool
	// variant is the kind of image the type needs (ImageVariant).
	variant string
}

// Accelerated reports whether the type has GPUs or Neuron devices (EFA alone does not count).
func (it *InstanceType) Accelerated() bool { return it.accelerated }

// ImageVariant is the kind of EKS-optimized image the type needs: "nvidia", "neuron" or "standard".
func (it *InstanceType) ImageVariant() string {
	if it.variant == "" {
		return "standard"
	}
	return it.variant
}

// AcceleratorTotal is the sum of the allocatable accelerator counts (0 for a type without any).
func (it *InstanceType) AcceleratorTotal() int64 {
	it.AllocatableCPUMemoryPods()
	return it.fastAccN
}

// AllocatableAccelerators returns the allocatable accelerator resources without touching maps.
func (it *InstanceType) AllocatableAccelerators() AcceleratorCounts {
	it.AllocatableCPUMemoryPods()
	return it.fastAcc
}

// AllocatableCPUMemoryPods returns allocatable millicores, bytes of memory and pods without touching maps.
func (it *InstanceType) AllocatableCPUMemoryPods() (int64, int64, int64) {
	if !it.fastValid {
		a := it.Allocatable()
		it.fast = [3]int64{a.Cpu().MilliValue(), a.Memory().Value(), a.Pods().Value()}
		it.fastAcc = AcceleratorCountsOf(a)
		it.fastAccN = 0
		for _, n := range it.fastAcc {
			it.fastAccN += int64(n)
		}
		it.fastValid = true
	}
	return it.fast[0], it.fast[1], it.fast[2]
}

// Overhead is what the node keeps for itself.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Total sums the overhead.
func (o Overhead) Total() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, rl := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved, o.EvictionThreshold} {
		for name, q := range rl {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// Allocatable is Capacity less Overhead: what pods may request. It is computed once; callers must not modify it.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	if it.allocatable == nil {
		it.allocatable = it.computeAllocatable()
	}
	return it.allocatable
}

// Labels returns the labels the type pins (single-valued requirements), computed once; callers must not modify it.
func (it *InstanceType) Labels() map[string]string {
	if it.labels == nil {
		it.labels = it.Requirements.Labels()
	}
	return it.labels
}

func (it *InstanceType) computeAllocatable() corev1.ResourceList {
	out := corev1.ResourceList{}
	total := it.Overhead.Total()
	for name, q := range it.Capacity {
		v := q.DeepCopy()
		if o, ok := total[name]; ok {
			v.Sub(o)
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, q.Format)
		}
		out[name] = v
	}
	return out
}

// WithExtraCapacity returns a copy of the type whose capacity also holds extra (extended resources a NodeOverlay
// adds), with its own offerings and its allocatable computed anew.
func (it *InstanceType) WithExtraCapacity(extra corev1.ResourceList) *InstanceType {
	c := *it
	c.Capacity = it.Capacity.DeepCopy()
	for name, q := range extra {
		c.Capacity[name] = q.DeepCopy()
	}
	c.Offerings = slices.Clone(it.Offerings)
	c.allocatable, c.fastValid = nil, false
	return &c
}

// WithOfferings returns a copy of the type with other offerings.
func (it *InstanceType) WithOfferings(offs Offerings) *InstanceType {
	c := *it
	c.Offerings = offs
	return &c
}

// OfferingPrice is the price of the offering of the named type in zone with capacity type ct among its, and false
// when none of them offers it.
func OfferingPrice(its []*InstanceType, name, zone, ct string) (float64, bool) {
	for _, it := range its {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == ct && o.Covered == nil {
				return o.Price, true
			}
		}
	}
	return 0, false
}

// Offering is an instance type in a zone with a capacity type.
type Offering struct {
	Zone string
	// ZoneID is the zone's ID (use1-az1), when known.
	ZoneID       string
	CapacityType string
	Price        float64
	// Available is false while the offering is in the unavailable-offerings (ICE) cache, or a reservation's has
	// no room.
	Available bool
	// ReservationID, ReservationType (default or capacity-block) and ReservationCapacity (instances it takes now)
	// describe a reserved offering (capacity type reserved).
	ReservationID       string
	ReservationType     string
	ReservationCapacity int
	// Covered is set on an on-demand offering a commitment (a Savings Plan, Reserved Instances) covers: its Price
	// is then nearly nothing, the hours being paid for already.
	Covered *Covered
	// RiskPremium is what Spot interruptions in the offering's pool recently added to its Price (package spotrisk):
	// the solver prefers other pools, the node is billed at the list price.
	RiskPremium float64
}

// Covered is the commitment that covers an offering: its name, how much of it one instance uses an hour, the room
// it had left when the offering was made, and the offering's list price. Zonal is true when the commitment covers
// the offering's zone only (zonal Reserved Instances).
type Covered struct {
	Commitment           string
	Use, Room, ListPrice float64
	Zonal                bool
}

// ListPrice is what the offering costs at list price: its Price less a risk premium, or for a covered offering
// the price it has beyond the commitment.
func (o Offering) ListPrice() float64 {
	if o.Covered != nil {
		return o.Covered.ListPrice
	}
	return o.Price - o.RiskPremium
}

// CacheKey is what the unavailable-offerings cache calls the offering's capacity: its capacity type, or for a
// reserved offering "reserved/<reservation id>".
func (o Offering) CacheKey() string {
	if o.ReservationID != "" {
		return stevedorev1.CapacityTypeReserved + "/" + o.ReservationID
	}
	return o.CapacityType
}

// AddCapacityType adds a capacity type to those the type's requirements say it is offered in. The type must be a
// copy of its own: its requirements are replaced, not changed in place.
func (it *InstanceType) AddCapacityType(ct string) {
	values := append(it.Requirements.Get(stevedorev1.LabelCapacityType).Values(), ct)
	reqs := it.Requirements.Clone()
	delete(reqs, stevedorev1.LabelCapacityType)
	reqs.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, values...))
	it.Requirements = reqs
	it.labels = reqs.Labels()
}

// Offerings of an instance type.
type Offerings []Offering

// HasCompatible reports whether an available offering's zone and capacity type reqs allow.
func (offs Offerings) HasCompatible(reqs scheduling.Requirements) bool {
	zone, zok := reqs[corev1.LabelTopologyZone]
	ct, cok := reqs[stevedorev1.LabelCapacityType]
	for _, o := range offs {
		if o.Available && (!zok || zone.Has(o.Zone)) && (!cok || ct.Has(o.CapacityType)) {
			return true
		}
	}
	return false
}

// Compatible returns the available offerings whose zone and capacity type reqs allow.
func (offs Offerings) Compatible(reqs scheduling.Requirements) Offerings {
	var out Offerings
	zone, ct := reqs.Get(corev1.LabelTopologyZone), reqs.Get(stevedorev1.LabelCapacityType)
	for _, o := range offs {
		if o.Available && zone.Has(o.Zone) && ct.Has(o.CapacityType) {
			out = append(out, o)
		}
	}
	return out
}

// Cheapest returns the cheapest offering, and false if there is none.
func (offs Offerings) Cheapest() (Offering, bool) {
	if len(offs) == 0 {
		return Offering{}, false
	}
	best := offs[0]
	for _, o := range offs[1:] {
		if o.Price < best.Price || (o.Price == best.Price && o.Zone < best.Zone) {
			best = o
		}
	}
	return best, true
}

// OverheadModel computes the overhead of a node from its type: AWS's EKS-optimized AMI defaults, or what the
// EC2NodeClass's kubelet settings say.
type OverheadModel struct {
	// VMMemoryPercent is the share of nominal memory the hypervisor and firmware keep.
	VMMemoryPercent float64
	// Kubelet settings from the EC2NodeClass (nil for defaults).
	Kubelet *stevedorev1.KubeletConfiguration
	// RootVolume is the size of the root volume, the node's ephemeral-storage capacity.
	RootVolume resource.Quantity
	// InstanceStoreRAID0: a type with NVMe instance store has the store's size as ephemeral-storage capacity
	// (instanceStorePolicy RAID0).
	InstanceStoreRAID0 bool
}

// DefaultOverheadModel is the model with AWS's defaults: 7.5% VM memory overhead, 20Gi root volume.
func DefaultOverheadModel() OverheadModel {
	return OverheadModel{VMMemoryPercent: 7.5, RootVolume: resource.MustParse("20Gi")}
}

// SetZoneIDs gives the type's offerings the IDs of their zones. The type must be a copy of its own (its offerings
// are changed in place).
func (it *InstanceType) SetZoneIDs(ids map[string]string) {
	for i := range it.Offerings {
		it.Offerings[i].ZoneID = ids[it.Offerings[i].Zone]
	}
}

// ZoneIDs returns the zone-to-ID mapping the types' offerings carry.
func ZoneIDs(its []*InstanceType) map[string]string {
	out := map[string]string{}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.ZoneID != "" {
				out[o.Zone] = o.ZoneID
			}
		}
	}
	return out
}

// CatalogInstanceTypes builds every instance type of the catalog under the overhead model of a node class (its
// kubelet settings and instance-store policy; the defaults when nc is nil) and the VM memory overhead, in every
// zone: what the offline commands use in place of the AWS provider.
func CatalogInstanceTypes(cat *catalog.File, nc *stevedorev1.EC2NodeClass, vmMemoryPercent float64) ([]*InstanceType, error) {
	model := DefaultOverheadModel()
	model.VMMemoryPercent = vmMemoryPercent
	if nc != nil {
		model.Kubelet = nc.Spec.Kubelet
		model.InstanceStoreRAID0 = nc.Spec.InstanceStorePolicy != nil && *nc.Spec.InstanceStorePolicy == stevedorev1.InstanceStorePolicyRAID0
	}
	its := make([]*InstanceType, 0, len(cat.InstanceTypes))
	for _, ct := range cat.InstanceTypes {
		it, err := NewInstanceType(ct, model, nil)
		if err != nil {
			return nil, err
		}
		it.SetZoneIDs(cat.ZoneIDs)
		its = append(its, it)
	}
	return its, nil
}

// MaxPods is the pod limit of a type under the model: the kubelet's maxPods if set, else the ENI limit; capped by
// podsPerCore.
func (m OverheadModel) MaxPods(it catalog.InstanceType) int64 {
	pods := int64(it.PodLimit())
	if m.Kubelet != nil && m.Kubelet.MaxPods != nil {
		pods = int64(*m.Kubelet.MaxPods)
	}
	if m.Kubelet != nil && m.Kubelet.PodsPerCore != nil && *m.Kubelet.PodsPerCore > 0 {
		pods = min(pods, int64(*m.Kubelet.PodsPerCore)*int64(it.VCPU))
	}
	return pods
}

// KubeReservedCPU is the EKS AMI's CPU reservation: 6% of the first core, 1% of the second, 0.5% of the third
// and fourth, 0.25% of every further core; in millicores.
func KubeReservedCPU(vcpu int) int64 {
	var milli float64
	for core := 1; core <= vcpu; core++ {
		switch {
		case core == 1:
			milli += 60
		case core == 2:
			milli += 10
		case core <= 4:
			milli += 5
		default:
			milli += 2.5
		}
	}
	return int64(math.Ceil(milli))
}

// KubeReservedMemoryMiB is the EKS AMI's memory reservation: 11 MiB per pod plus 255 MiB.
func KubeReservedMemoryMiB(maxPods int64) int64 { return 11*maxPods + 255 }

// NewInstanceType builds an instance type from a catalog entry under the overhead model, with offerings limited to
// zones (all zones if nil). A catalog overhead on the entry replaces the model's reservations.
func NewInstanceType(it catalog.InstanceType, m OverheadModel, zones map[string]bool) (*InstanceType, error) {
	maxPods := m.MaxPods(it)
	vmPercent := m.VMMemoryPercent
	if it.Overhead != nil && it.Overhead.VMMemoryPercent != nil {
		vmPercent = *it.Overhead.VMMemoryPercent
	}
	memMiB := int64(math.Floor(float64(it.MemoryMiB) * (1 - vmPercent/100)))
	out := &InstanceType{
		Name: it.Name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(int64(it.VCPU), resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(maxPods, resource.DecimalSI),
			corev1.ResourceEphemeralStorage: m.RootVolume.DeepCopy(),
		},
		accelerated: it.GPUs != nil || it.Neuron != nil,
		variant:     ImageVariant(it),
	}
	if m.InstanceStoreRAID0 && it.LocalNVMeGB > 0 {
		out.Capacity[corev1.ResourceEphemeralStorage] = *resource.NewScaledQuantity(int64(it.LocalNVMeGB), resource.Giga)
	}
	for name, q := range AcceleratorCapacity(it) {
		out.Capacity[name] = q
	}
	var err error
	if it.Overhead != nil {
		out.Overhead, err = catalogOverhead(it)
	} else if out.Overhead, err = m.overhead(it.VCPU, maxPods); err != nil {
		err = fmt.Errorf("%s: %w", it.Name, err)
	}
	if err != nil {
		return nil, err
	}
	out.Offerings = zoneOfferings(it, zones)
	out.Requirements = instanceTypeRequirements(it, out.Offerings)
	out.allocatable = out.computeAllocatable()
	out.labels = out.Requirements.Labels()
	out.AllocatableCPUMemoryPods()
	return out, nil
}

// catalogOverhead is the overhead a catalog entry sets for its type: fixed reservations of CPU and memory.
func catalogOverhead(it catalog.InstanceType) (Overhead, error) {
	fixed := corev1.ResourceList{}
	for _, r := range []struct {
		name corev1.ResourceName
		q    string
	}{{corev1.ResourceCPU, it.Overhead.CPU}, {corev1.ResourceMemory, it.Overhead.Memory}} {
		if r.q == "" {
			continue
		}
		v, err := resource.ParseQuantity(r.q)
		if err != nil {
			return Overhead{}, fmt.Errorf("%s overhead %s: %w", it.Name, r.name, err)
		}
		fixed[r.name] = v
	}
	return Overhead{KubeReserved: fixed}, nil
}

// zoneOfferings are a catalog entry's offerings in zones (every zone if nil), by zone then capacity type.
func zoneOfferings(it catalog.InstanceType, zones map[string]bool) []Offering {
	var out []Offering
	for _, o := range it.Offerings {
		if zones == nil || zones[o.Zone] {
			out = append(out, Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: o.Price, Available: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.CapacityType < b.CapacityType
	})
	return out
}

func (m OverheadModel) overhead(vcpu int, maxPods int64) (Overhead, error) {
	o := Overhead{
		KubeReserved: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewMilliQuantity(KubeReservedCPU(vcpu), resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(KubeReservedMemoryMiB(maxPods)*1024*1024, resource.BinarySI),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
		SystemReserved:    corev1.ResourceList{},
		EvictionThreshold: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
	}
	k := m.Kubelet
	if k == nil {
		return o, nil
	}
	var err error
	if o.KubeReserved, err = overrideResources(o.KubeReserved, k.KubeReserved); err != nil {
		return o, fmt.Errorf("kubeReserved: %w", err)
	}
	if o.SystemReserved, err = overrideResources(o.SystemReserved, k.SystemReserved); err != nil {
		return o, fmt.Errorf("systemReserved: %w", err)
	}
	if v, ok := k.EvictionHard["memory.available"]; ok {
		if strings.HasSuffix(v, "%") {
			return o, fmt.Errorf("evictionHard memory.available %q: percentages are not supported for planning", v)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return o, fmt.Errorf("evictionHard memory.available: %w", err)
		}
		o.EvictionThreshold[corev1.ResourceMemory] = q
	}
	return o, nil
}

func overrideResources(base corev1.ResourceList, with map[string]string) (corev1.ResourceList, error) {
	out := base.DeepCopy()
	for name, v := range with {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

var familyPattern = regexp.MustCompile(`^([a-z]+)([0-9]+)([a-z\-]*)$`)

// instanceTypeRequirements are the labels a node of this type carries, and the zones and capacity types it is
// offered in.
func instanceTypeRequirements(it catalog.InstanceType, offerings Offerings) scheduling.Requirements {
	in := func(key string, values ...string) *scheduling.Requirement {
		return scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, values...)
	}
	rs := scheduling.NewRequirements(
		in(corev1.LabelInstanceTypeStable, it.Name),
		in(corev1.LabelArchStable, it.Architecture),
		in(corev1.LabelOSStable, "linux"),
		in(stevedorev1.LabelInstanceCPU, strconv.Itoa(it.VCPU)),
		in(stevedorev1.LabelInstanceMemory, strconv.FormatInt(it.MemoryMiB, 10)),
	)
	family, size, ok := strings.Cut(it.Name, ".")
	if ok {
		rs.Add(in(stevedorev1.LabelInstanceFamily, family))
		rs.Add(in(stevedorev1.LabelInstanceSize, size))
		if m := familyPattern.FindStringSubmatch(family); m != nil {
			rs.Add(in(stevedorev1.LabelInstanceCategory, m[1]))
			rs.Add(in(stevedorev1.LabelInstanceGeneration, m[2]))
		}
	}
	if it.Hypervisor != "" {
		rs.Add(in(stevedorev1.LabelInstanceHypervisor, it.Hypervisor))
	}
	for k, v := range processorLabels(it) {
		rs.Add(in(k, v))
	}
	for k, v := range AcceleratorLabels(it) {
		rs.Add(in(k, v))
	}
	for k, v := range it.Labels {
		rs.Add(in(k, v))
	}
	zones, cts := map[string]bool{}, map[string]bool{}
	for _, o := range offerings {
		zones[o.Zone], cts[o.CapacityType] = true, true
	}
	rs.Add(in(corev1.LabelTopologyZone, keys(zones)...))
	rs.Add(in(stevedorev1.LabelCapacityType, keys(cts)...))
	return rs
}

// processorLabels are a type's processor, EBS, encryption, flex and tenancy labels, as Karpenter derives them from
// DescribeInstanceTypes: the manufacturer in lower case with dashes for spaces ("intel", "amd", "aws"), the
// sustained clock speed in MHz and the EBS bandwidth (of a type EBS-optimized by default) when known; whether it
// encrypts traffic in transit and is a flex type on every type; tenancy default, the only one Stevedore launches.
func processorLabels(it catalog.InstanceType) map[string]string {
	family, _, _ := strings.Cut(it.Name, ".")
	out := map[string]string{
		stevedorev1.LabelInstanceEncryptionInTransit: strconv.FormatBool(it.EncryptionInTransit),
		stevedorev1.LabelInstanceCapabilityFlex:      strconv.FormatBool(strings.Contains(family, "-flex")),
		stevedorev1.LabelInstanceTenancy:             stevedorev1.TenancyDefault,
	}
	if it.CPUManufacturer != "" {
		out[stevedorev1.LabelInstanceCPUManufacturer] = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(it.CPUManufacturer)), " ", "-")
	}
	if it.SustainedClockSpeedMHz > 0 {
		out[stevedorev1.LabelInstanceCPUSustainedClockSpeed] = strconv.Itoa(it.SustainedClockSpeedMHz)
	}
	if it.EBSBandwidthMbps > 0 {
		out[stevedorev1.LabelInstanceEBSBandwidth] = strconv.Itoa(it.EBSBandwidthMbps)
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
