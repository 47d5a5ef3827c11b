/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package fake is an in-memory cloud.Provider for unit tests of decision logic: instance types from the embedded
// catalog, instances kept in a map, and fault injection (errors queued per call, offerings without capacity,
// drifted NodeClaims). Tests that need the real AWS wire use the emulator in pkg/sandbox/awsemu instead.
package fake

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// Call names, for queued errors and the call log.
const (
	CallCreate        = "Create"
	CallDelete        = "Delete"
	CallGet           = "Get"
	CallReboot        = "Reboot"
	CallList          = "List"
	CallInstanceTypes = "InstanceTypes"
	CallIsDrifted     = "IsDrifted"
)

// Provider is an in-memory cloud. The zero value is not usable: call New.
type Provider struct {
	mu sync.Mutex
	// types are every type the cloud sells, by name.
	types map[string]*cloud.InstanceType
	// order lists type names sorted by name (deterministic iteration).
	order []string
	// instances are the live and terminated instances, by ID.
	instances map[string]*cloud.Instance
	// errors are queued per call name; each call takes the first one.
	errors map[string][]error
	// noCapacity holds offerings ("type/zone/capacity-type") that fail with insufficient capacity.
	noCapacity map[string]bool
	// unavailable holds offerings marked through MarkUnavailable, with the reason.
	unavailable map[string]string
	// drifted holds the drift reason of NodeClaims, by name.
	drifted map[string]string
	calls   []string
	next    int
	now     func() time.Time
}

// ForTest is a fake cloud selling types in zones on clock now (the test's fake clock), failing the test when the
// catalog does not have them.
func ForTest(t testing.TB, now func() time.Time, zones []string, types ...string) *Provider {
	t.Helper()
	cloud, err := New(zones, types...)
	if err != nil {
		t.Fatal(err)
	}
	cloud.SetClock(now)
	return cloud
}

// New returns a cloud selling the named catalog types (every type of the embedded catalog if none is named) in
// zones (the catalog's zones if none).
func New(zones []string, typeNames ...string) (*Provider, error) {
	var zoneSet map[string]bool
	if len(zones) > 0 {
		zoneSet = map[string]bool{}
		for _, z := range zones {
			zoneSet[z] = true
		}
	}
	want := map[string]bool{}
	for _, n := range typeNames {
		want[n] = true
	}
	p := &Provider{types: map[string]*cloud.InstanceType{}, instances: map[string]*cloud.Instance{},
		errors: map[string][]error{}, noCapacity: map[string]bool{}, unavailable: map[string]string{},
		drifted: map[string]string{}, now: time.Now}
	missing := map[string]bool{}
	for n := range want {
		missing[n] = true
	}
	for _, entry := range catalog.Default().InstanceTypes {
		if len(want) > 0 && !want[entry.Name] {
			continue
		}
		it, err := cloud.NewInstanceType(entry, cloud.DefaultOverheadModel(), zoneSet)
		if err != nil {
			return nil, err
		}
		p.types[it.Name] = it
		p.order = append(p.order, it.Name)
		delete(missing, entry.Name)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("instance types not in the catalog: %v", sortedKeys(missing))
	}
	sort.Strings(p.order)
	return p, nil
}

// SetClock makes launch times come from now.
func (p *Provider) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// FailNext queues an error for the next call of the named method (CallCreate...); several queue in order.
func (p *Provider) FailNext(call string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errors[call] = append(p.errors[call], err)
}

// NoCapacity makes launches of the offering fail with insufficient capacity until Restore.
func (p *Provider) NoCapacity(instanceType, zone, capacityType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noCapacity[offeringKey(instanceType, zone, capacityType)] = true
}

// Restore gives the offering capacity again (and forgets it was marked unavailable).
func (p *Provider) Restore(instanceType, zone, capacityType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.noCapacity, offeringKey(instanceType, zone, capacityType))
	delete(p.unavailable, offeringKey(instanceType, zone, capacityType))
}

// Drift makes IsDrifted report the NodeClaim as drifted for reason ("" clears it).
func (p *Provider) Drift(claim, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reason == "" {
		delete(p.drifted, claim)
		return
	}
	p.drifted[claim] = reason
}

// AddInstance records an instance as if launched outside the provider (e.g. by an earlier process).
func (p *Provider) AddInstance(inst cloud.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[inst.ID] = &inst
}

// Calls returns the methods called so far, in order, as "Method" or "Method arg".
func (p *Provider) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// Unavailable returns the offerings marked unavailable, as "type/zone/capacity-type" → reason.
func (p *Provider) Unavailable() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for k, v := range p.unavailable {
		out[k] = v
	}
	return out
}

// InstanceType returns a type the cloud sells, or nil.
func (p *Provider) InstanceType(name string) *cloud.InstanceType {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.types[name]
}

// record logs the call and returns the error queued for it, if any. Callers hold mu.
func (p *Provider) record(call, arg string) error {
	if arg != "" {
		p.calls = append(p.calls, call+" "+arg)
	} else {
		p.calls = append(p.calls, call)
	}
	if q := p.errors[call]; len(q) > 0 {
		p.errors[call] = q[1:]
		return q[0]
	}
	return nil
}

// Create launches the first instance type the NodeClaim allows (in its order) in the first zone and capacity
// type (on-demand before spot) with capacity.
func (p *Provider) Create(_ context.Context, claim *stevedorev1.NodeClaim) (*cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallCreate, claim.Name); err != nil {
		return nil, err
	}
	reqs, err := claimRequirements(claim)
	if err != nil {
		return nil, err
	}
	var tried []string
	for _, name := range p.candidateTypes(claim, reqs) {
		it := p.types[name]
		for _, o := range orderedOfferings(it.Offerings) {
			if !offeringAllowed(reqs, o) || p.unavailable[offeringKey(name, o.Zone, o.CapacityType)] != "" {
				continue
			}
			key := offeringKey(name, o.Zone, o.CapacityType)
			if p.noCapacity[key] {
				tried = append(tried, key+": InsufficientInstanceCapacity")
				p.unavailable[key] = "InsufficientInstanceCapacity"
				continue
			}
			p.next++
			id := fmt.Sprintf("i-%017x", p.next)
			inst := &cloud.Instance{ID: id, ProviderID: "aws:///" + o.Zone + "/" + id,
				NodeName: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", p.next/256, p.next%256), Type: name, Zone: o.Zone,
				CapacityType: o.CapacityType, ImageID: "ami-fake", State: cloud.StateRunning, Price: o.Price,
				LaunchTime: p.now(), Tags: map[string]string{"stevedore.dev/nodeclaim": claim.Name}}
			p.instances[id] = inst
			out := *inst
			return &out, nil
		}
	}
	return nil, &cloud.InsufficientCapacityError{Tried: tried}
}

// candidateTypes lists the types the requirements allow: in the order of the NodeClaim's instance-type In
// requirement (cheapest first, as the provisioner writes it), else by name.
func (p *Provider) candidateTypes(claim *stevedorev1.NodeClaim, reqs scheduling.Requirements) []string {
	names := p.order
	for _, r := range claim.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn) {
			names = r.Values
		}
	}
	var out []string
	for _, n := range names {
		if it := p.types[n]; it != nil && reqs.Compatible(it.Requirements, func(string) bool { return true }) == nil {
			out = append(out, n)
		}
	}
	return out
}

// Delete terminates the instance; deleting a terminated or unknown instance is not an error.
func (p *Provider) Delete(_ context.Context, instanceID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallDelete, instanceID); err != nil {
		return err
	}
	if inst := p.instances[instanceID]; inst != nil {
		inst.State = cloud.StateTerminated
	}
	return nil
}

// Reboot records the reboot of a live instance; an unknown or terminated one is an error wrapping
// cloud.ErrNotFound.
func (p *Provider) Reboot(_ context.Context, instanceID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallReboot, instanceID); err != nil {
		return err
	}
	if inst := p.instances[instanceID]; inst == nil || inst.State == cloud.StateTerminated {
		return fmt.Errorf("%s: %w", instanceID, cloud.ErrNotFound)
	}
	return nil
}

// Get returns the instance or an error wrapping cloud.ErrNotFound.
func (p *Provider) Get(_ context.Context, instanceID string) (*cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallGet, instanceID); err != nil {
		return nil, err
	}
	inst := p.instances[instanceID]
	if inst == nil || inst.State == cloud.StateTerminated {
		return nil, fmt.Errorf("%s: %w", instanceID, cloud.ErrNotFound)
	}
	out := *inst
	return &out, nil
}

// List returns the live instances, by ID.
func (p *Provider) List(context.Context) ([]*cloud.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallList, ""); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(p.instances))
	for id, inst := range p.instances {
		if inst.State != cloud.StateTerminated {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	out := make([]*cloud.Instance, 0, len(ids))
	for _, id := range ids {
		inst := *p.instances[id]
		out = append(out, &inst)
	}
	return out, nil
}

// InstanceTypes returns every type, by name, with unavailable offerings marked.
func (p *Provider) InstanceTypes(_ context.Context, nodePool *stevedorev1.NodePool) ([]*cloud.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallInstanceTypes, nodePool.Name); err != nil {
		return nil, err
	}
	out := make([]*cloud.InstanceType, 0, len(p.order))
	for _, name := range p.order {
		it := *p.types[name]
		it.Offerings = append(cloud.Offerings(nil), it.Offerings...)
		for i, o := range it.Offerings {
			if p.unavailable[offeringKey(name, o.Zone, o.CapacityType)] != "" {
				it.Offerings[i].Available = false
			}
		}
		out = append(out, &it)
	}
	return out, nil
}

// IsDrifted returns the reason set by Drift.
func (p *Provider) IsDrifted(_ context.Context, claim *stevedorev1.NodeClaim) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.record(CallIsDrifted, claim.Name); err != nil {
		return "", err
	}
	return p.drifted[claim.Name], nil
}

// MarkUnavailable records the offering as without capacity.
func (p *Provider) MarkUnavailable(instanceType, zone, capacityType, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[offeringKey(instanceType, zone, capacityType)] = reason
}

func claimRequirements(claim *stevedorev1.NodeClaim) (scheduling.Requirements, error) {
	var nsr []corev1.NodeSelectorRequirement
	for _, r := range claim.Spec.Requirements {
		nsr = append(nsr, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
	reqs, err := scheduling.FromNodeSelectorRequirements(nsr...)
	if err != nil {
		return nil, fmt.Errorf("NodeClaim %s requirements: %w", claim.Name, err)
	}
	return reqs, nil
}

// orderedOfferings sorts on-demand before spot, then by zone.
func orderedOfferings(os cloud.Offerings) cloud.Offerings {
	out := append(cloud.Offerings(nil), os...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CapacityType != out[j].CapacityType {
			return out[i].CapacityType == "on-demand"
		}
		return out[i].Zone < out[j].Zone
	})
	return out
}

func offeringAllowed(reqs scheduling.Requirements, o cloud.Offering) bool {
	return reqs.Get(corev1.LabelTopologyZone).Has(o.Zone) && reqs.Get(stevedorev1.LabelCapacityType).Has(o.CapacityType)
}

func offeringKey(instanceType, zone, capacityType string) string {
	return instanceType + "/" + zone + "/" + capacityType
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
