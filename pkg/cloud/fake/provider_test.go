/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package fake

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

func claim(name string, types ...string) *stevedorev1.NodeClaim {
	c := &stevedorev1.NodeClaim{}
	c.Name = name
	c.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: types},
		{Key: stevedorev1.LabelCapacityType, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"on-demand"}},
	}
	return c
}

func TestCreateFollowsTheClaimAndInjectedFaults(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	tests := []struct {
		name      string
		setup     func(p *Provider)
		claim     *stevedorev1.NodeClaim
		wantType  string
		wantZone  string
		wantErr   error
		wantICE   bool
		wantMarks int
	}{
		{name: "the first type of the claim, first zone", claim: claim("a", "m5.large", "c5.large"), wantType: "m5.large", wantZone: "us-east-1a"},
		{name: "a queued error is returned once", setup: func(p *Provider) { p.FailNext(CallCreate, boom) }, claim: claim("a", "m5.large"), wantErr: boom},
		{name: "no capacity in one zone moves to the next and marks the offering",
			setup: func(p *Provider) { p.NoCapacity("m5.large", "us-east-1a", "on-demand") },
			claim: claim("a", "m5.large"), wantType: "m5.large", wantZone: "us-east-1b", wantMarks: 1},
		{name: "no capacity anywhere is an insufficient capacity error",
			setup: func(p *Provider) {
				p.NoCapacity("m5.large", "us-east-1a", "on-demand")
				p.NoCapacity("m5.large", "us-east-1b", "on-demand")
			},
			claim: claim("a", "m5.large"), wantICE: true, wantMarks: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New([]string{"us-east-1a", "us-east-1b"}, "m5.large", "c5.large")
			if err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(p)
			}
			inst, err := p.Create(ctx, tt.claim)
			var ice *cloud.InsufficientCapacityError
			switch {
			case tt.wantErr != nil || tt.wantICE:
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || tt.wantICE && !errors.As(err, &ice) {
					t.Fatalf("Create error %v, want %v (insufficient capacity %v)", err, tt.wantErr, tt.wantICE)
				}
			case err != nil:
				t.Fatal(err)
			case inst.Type != tt.wantType || inst.Zone != tt.wantZone || inst.CapacityType != "on-demand":
				t.Errorf("launched %s in %s (%s), want %s in %s on-demand", inst.Type, inst.Zone, inst.CapacityType, tt.wantType, tt.wantZone)
			}
			if got := len(p.Unavailable()); got != tt.wantMarks {
				t.Errorf("%d offerings marked unavailable, want %d", got, tt.wantMarks)
			}
			if tt.wantErr != nil {
				if _, err := p.Create(ctx, tt.claim); err != nil {
					t.Errorf("the queued error was returned twice: %v", err)
				}
			}
		})
	}
}

func TestInstancesLiveUntilDeleted(t *testing.T) {
	ctx := context.Background()
	p, err := New(nil, "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := p.Create(ctx, claim("a", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Get(ctx, inst.ID); err != nil || got.ID != inst.ID {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if err := p.Delete(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, inst.ID); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if list, _ := p.List(ctx); len(list) != 0 {
		t.Errorf("List after Delete: %d instances", len(list))
	}
	if err := p.Delete(ctx, "i-unknown"); err != nil {
		t.Errorf("deleting an unknown instance: %v", err)
	}
	want := []string{"Create a", "Get " + inst.ID, "Delete " + inst.ID, "Get " + inst.ID, "List", "Delete i-unknown"}
	if got := p.Calls(); len(got) != len(want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

func TestInstanceTypesShowUnavailableOfferingsAndDrift(t *testing.T) {
	ctx := context.Background()
	p, err := New([]string{"us-east-1a"}, "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	p.MarkUnavailable("m5.large", "us-east-1a", "spot", "interrupted")
	np := &stevedorev1.NodePool{}
	np.Name = "default"
	its, err := p.InstanceTypes(ctx, np)
	if err != nil || len(its) != 1 {
		t.Fatalf("InstanceTypes = %d types, %v", len(its), err)
	}
	for _, o := range its[0].Offerings {
		if want := o.CapacityType != "spot"; o.Available != want {
			t.Errorf("offering %s/%s available %v, want %v", o.Zone, o.CapacityType, o.Available, want)
		}
	}
	if p.InstanceType("m5.large").Offerings[0].Available != true {
		t.Error("InstanceTypes changed the cloud's own types")
	}
	p.Drift("b", "AMI changed")
	if why, _ := p.IsDrifted(ctx, claim("b")); why != "AMI changed" {
		t.Errorf("IsDrifted = %q", why)
	}
	if _, err := New(nil, "no-such.type"); err == nil {
		t.Error("New accepted a type the catalog does not have")
	}
}
