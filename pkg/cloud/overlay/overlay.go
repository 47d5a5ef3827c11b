/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package overlay applies NodeOverlays to the instance types a NodePool may launch: the price of the offerings an
// overlay selects, and extended resources added to the capacity of the types it selects. Overlays are ordered by
// weight (highest first), then by name; the first that selects an offering and sets a price decides it, and each
// extended resource comes from the first that selects the type and sets it. Two overlays of the same weight whose
// requirements can select the same offering and that set the same thing differently conflict: the later by name
// is left out, and says so.
package overlay

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// karpenterNodePool is the label by which Karpenter's NodeOverlays select a NodePool.
const karpenterNodePool = "karpenter.sh/nodepool"

// Overlay is a NodeOverlay ready to apply.
type Overlay struct {
	Name   string
	Weight int32
	// Requirements select offerings.
	Requirements scheduling.Requirements
	// price replaces an offering's price; adjust changes it (by percent when percent is true).
	price   *float64
	adjust  *float64
	percent bool
	// priceSpec is what the spec says about the price, to compare overlays ("" when it says nothing).
	priceSpec string
	Capacity  corev1.ResourceList
}

// SetsPrice reports whether the overlay changes prices.
func (o *Overlay) SetsPrice() bool { return o.priceSpec != "" }

// Compile checks a NodeOverlay and returns it ready to apply, or why it cannot be applied (the API server refuses
// most such specs; this catches the rest, such as a Gte bound that does not fit in an integer).
func Compile(no *stevedorev1.NodeOverlay) (*Overlay, error) {
	out := &Overlay{Name: no.Name, Requirements: scheduling.Requirements{}, Capacity: no.Spec.Capacity}
	if no.Spec.Weight != nil {
		out.Weight = *no.Spec.Weight
	}
	for i, r := range no.Spec.Requirements {
		key, req, err := compileRequirement(r)
		if err != nil {
			return nil, fmt.Errorf("spec.requirements[%d]: %w", i, err)
		}
		if prev, ok := out.Requirements[key]; ok {
			req = prev.Intersection(req)
		}
		out.Requirements[key] = req
	}
	if err := out.compilePrice(no.Spec); err != nil {
		return nil, err
	}
	for name := range no.Spec.Capacity {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
			return nil, fmt.Errorf("spec.capacity: %s cannot be set; only extended resources", name)
		}
	}
	return out, nil
}

// compileRequirement turns one overlay requirement into a scheduling requirement and the key it is on: Karpenter's
// NodePool key is Stevedore's (the integer bounds Gte and Lte are scheduling's own operators).
func compileRequirement(r stevedorev1.NodeOverlayRequirement) (string, *scheduling.Requirement, error) {
	op, values, key := corev1.NodeSelectorOperator(r.Operator), r.Values, r.Key
	if key == karpenterNodePool {
		key = stevedorev1.LabelNodePool // Karpenter's overlays name the NodePool so
	}
	req, err := scheduling.NewRequirement(key, op, values...)
	return key, req, err
}

// compilePrice reads the overlay's price or price adjustment (an amount or a percentage).
func (o *Overlay) compilePrice(spec stevedorev1.NodeOverlaySpec) error {
	switch {
	case spec.Price != nil:
		v, err := strconv.ParseFloat(*spec.Price, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("spec.price %q is not a price", *spec.Price)
		}
		o.price, o.priceSpec = &v, "price "+*spec.Price
	case spec.PriceAdjustment != nil:
		s := *spec.PriceAdjustment
		o.percent = strings.HasSuffix(s, "%")
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || (o.percent && v < -100) {
			return fmt.Errorf("spec.priceAdjustment %q is not a signed amount or percentage (at least -100%%)", s)
		}
		o.adjust, o.priceSpec = &v, "priceAdjustment "+s
	}
	return nil
}

// Apply returns the overlay's price for an offering priced p.
func (o *Overlay) Apply(p float64) float64 {
	switch {
	case o.price != nil:
		return *o.price
	case o.adjust != nil && o.percent:
		return math.Max(0, p*(1+*o.adjust/100))
	case o.adjust != nil:
		return math.Max(0, p+*o.adjust)
	}
	return p
}

// Set is the NodeOverlays in force, in the order they decide.
type Set struct {
	overlays []*Overlay
	// Problems says, by NodeOverlay name, why one is not applied (an invalid spec, a conflict).
	Problems map[string]string
}

// NewSet compiles the NodeOverlays, orders them, and leaves out those that are invalid or conflict with one of
// the same weight that comes first by name.
func NewSet(list []*stevedorev1.NodeOverlay) *Set {
	s := &Set{Problems: map[string]string{}}
	var compiled []*Overlay
	for _, no := range list {
		if no.DeletionTimestamp != nil {
			continue
		}
		o, err := Compile(no)
		if err != nil {
			s.Problems[no.Name] = err.Error()
			continue
		}
		compiled = append(compiled, o)
	}
	sort.Slice(compiled, func(i, j int) bool {
		if compiled[i].Weight != compiled[j].Weight {
			return compiled[i].Weight > compiled[j].Weight
		}
		return compiled[i].Name < compiled[j].Name
	})
	for _, o := range compiled {
		if why := s.conflict(o); why != "" {
			s.Problems[o.Name] = why
			continue
		}
		s.overlays = append(s.overlays, o)
	}
	return s
}

// conflict says why o cannot be applied beside the overlays already in force, or "".
func (s *Set) conflict(o *Overlay) string {
	for _, prev := range s.overlays {
		if prev.Weight != o.Weight || prev.Requirements.Intersects(o.Requirements) != nil {
			continue
		}
		if prev.SetsPrice() && o.SetsPrice() && prev.priceSpec != o.priceSpec {
			return fmt.Sprintf("conflicts with NodeOverlay %s: both have weight %d, can select the same offerings and set their price differently (%s, %s); give one a higher weight",
				prev.Name, o.Weight, prev.priceSpec, o.priceSpec)
		}
		for name, q := range o.Capacity {
			if p, ok := prev.Capacity[name]; ok && !equality.Semantic.DeepEqual(p, q) {
				return fmt.Sprintf("conflicts with NodeOverlay %s: both have weight %d, can select the same instance types and set capacity %s differently (%s, %s); give one a higher weight",
					prev.Name, o.Weight, name, p.String(), q.String())
			}
		}
	}
	return ""
}

// Empty reports whether no overlay is in force.
func (s *Set) Empty() bool { return len(s.overlays) == 0 }

// Apply returns the NodePool's instance types with the overlays applied: copies where something changed, the
// types themselves where nothing did. An offering's price is decided by the first overlay that selects it and
// sets a price; each extended resource by the first that selects the type (one of its offerings) and sets it.
func (s *Set) Apply(np *stevedorev1.NodePool, types []*cloud.InstanceType) []*cloud.InstanceType {
	if s.Empty() {
		return types
	}
	pool := poolContext(np)
	out := make([]*cloud.InstanceType, len(types))
	for i, it := range types {
		out[i] = s.applyType(pool, it)
	}
	return out
}

// pool is what a NodePool adds to its nodes' labels: its name and template labels, and its template requirements.
type pool struct {
	labels       map[string]string
	requirements scheduling.Requirements
}

func poolContext(np *stevedorev1.NodePool) pool {
	p := pool{labels: map[string]string{stevedorev1.LabelNodePool: np.Name}, requirements: scheduling.Requirements{}}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		p.labels[k] = v
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if req, err := scheduling.NewRequirement(r.Key, corev1.NodeSelectorOperator(r.Operator), r.Values...); err == nil {
			p.requirements.Add(req)
		}
	}
	return p
}

func (s *Set) applyType(p pool, it *cloud.InstanceType) *cloud.InstanceType {
	var prices []float64 // by offering, when some overlay decides one
	extra := corev1.ResourceList{}
	typeLabels := it.Labels()
	for _, o := range s.overlays {
		if !selectsType(o, p, it, typeLabels) {
			continue
		}
		var matched bool
		if prices, matched = o.priceOfferings(it, prices); !matched {
			continue
		}
		for name, q := range o.Capacity {
			if _, ok := extra[name]; !ok {
				extra[name] = q
			}
		}
	}
	if prices == nil && len(extra) == 0 {
		return it
	}
	out := it.WithExtraCapacity(extra)
	for j, price := range prices {
		if !math.IsNaN(price) {
			out.Offerings[j].Price = price
			out.PriceOverlaid = true
		}
	}
	return out
}

// priceOfferings decides, in prices (by offering; NaN while undecided, nil when nothing is decided yet), the
// price of each offering of it the overlay selects that no earlier overlay decided; it reports whether the overlay
// selects any offering.
func (o *Overlay) priceOfferings(it *cloud.InstanceType, prices []float64) ([]float64, bool) {
	matched := false
	for j, off := range it.Offerings {
		if !selectsOffering(o, off) {
			continue
		}
		matched = true
		if !o.SetsPrice() {
			continue
		}
		if prices == nil {
			prices = make([]float64, len(it.Offerings))
			for k := range prices {
				prices[k] = math.NaN() // not decided yet
			}
		}
		if math.IsNaN(prices[j]) {
			prices[j] = o.Apply(off.Price)
		}
	}
	return prices, matched
}

// selectsType reports whether the overlay's requirements on other keys than zone and capacity type allow the type
// in the NodePool.
func selectsType(o *Overlay, p pool, it *cloud.InstanceType, typeLabels map[string]string) bool {
	for key, r := range o.Requirements {
		if key == corev1.LabelTopologyZone || key == stevedorev1.LabelCapacityType {
			continue
		}
		if v, ok := typeLabels[key]; ok {
			if !r.Has(v) {
				return false
			}
			continue
		}
		if v, ok := p.labels[key]; ok {
			if !r.Has(v) {
				return false
			}
			continue
		}
		if n := it.Requirements.Get(key); it.Requirements.Has(key) {
			if (scheduling.Requirements{key: r}).Intersects(scheduling.Requirements{key: n}) != nil {
				return false
			}
			continue
		}
		if p.requirements.Has(key) {
			if (scheduling.Requirements{key: r}).Intersects(scheduling.Requirements{key: p.requirements.Get(key)}) != nil {
				return false
			}
			continue
		}
		if !r.AllowsAbsence() {
			return false
		}
	}
	return true
}

// selectsOffering reports whether the overlay's zone and capacity type requirements allow the offering.
func selectsOffering(o *Overlay, off cloud.Offering) bool {
	if r, ok := o.Requirements[corev1.LabelTopologyZone]; ok && !r.Has(off.Zone) {
		return false
	}
	if r, ok := o.Requirements[stevedorev1.LabelCapacityType]; ok && !r.Has(off.CapacityType) {
		return false
	}
	return true
}
