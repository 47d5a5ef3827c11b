/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// addReservedNodeClass adds node class "reserved", selecting the reservations tagged team=ml.
func (f *fixture) addReservedNodeClass(t *testing.T) {
	t.Helper()
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "reserved", UID: "uid-reserved"},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole",
			SubnetSelectorTerms:              []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			CapacityReservationSelectorTerms: []stevedorev1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}}})
}

// createReservation creates an On-Demand Capacity Reservation through the EC2 API and returns its id.
func (f *fixture) createReservation(t *testing.T, instanceType, zone string, count int32, tags map[string]string) string {
	t.Helper()
	in := &ec2.CreateCapacityReservationInput{InstanceType: aws.String(instanceType), AvailabilityZone: aws.String(zone),
		InstanceCount: aws.Int32(count), InstancePlatform: ec2types.CapacityReservationInstancePlatformLinuxUnix,
		InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted}
	if len(tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeCapacityReservation, Tags: toEC2Tags(tags)}}
	}
	out, err := f.provider.ec2.CreateCapacityReservation(testCtx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.CapacityReservation.CapacityReservationId)
}

func reservedClaim(name, instanceType string, capacityTypes ...string) *stevedorev1.NodeClaim {
	c := claim(name, in(corev1.LabelInstanceTypeStable, instanceType), in(stevedorev1.LabelCapacityType, capacityTypes...))
	c.Spec.NodeClassRef.Name = "reserved"
	return c
}

// TestReservationsBecomeReservedOfferingsThatLaunchesFillFirst: a reservation the node class selects (by tag)
// gives its type a reserved offering priced near zero; launches target it while it has room, then fall back to
// on-demand and cache the exhausted reservation; a reservation the terms do not select gives nothing.
func TestReservationsBecomeReservedOfferingsThatLaunchesFillFirst(t *testing.T) {
	f := newFixture(t, nil)
	f.addReservedNodeClass(t)
	id := f.createReservation(t, "m5.large", "us-east-1a", 2, map[string]string{"team": "ml"})
	other := f.createReservation(t, "c5.large", "us-east-1b", 3, nil)

	its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("r").NodeClass("reserved").Obj())
	if err != nil {
		t.Fatal(err)
	}
	var reserved []cloud.Offering
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.CapacityType == stevedorev1.CapacityTypeReserved {
				reserved = append(reserved, o)
				if it.Name != "m5.large" || o.Zone != "us-east-1a" || o.ReservationID != id || !o.Available || o.ReservationCapacity != 2 || o.Price > 0.0001 {
					t.Errorf("reserved offering %s %+v, want m5.large in us-east-1a of %s with room for 2, nearly free", it.Name, o, id)
				}
				if !it.Requirements.Get(stevedorev1.LabelCapacityType).Has(stevedorev1.CapacityTypeReserved) {
					t.Errorf("%s's requirements do not offer capacity type reserved", it.Name)
				}
			}
		}
	}
	if len(reserved) != 1 {
		t.Fatalf("%d reserved offerings, want the one of %s (not %s, which the terms do not select)", len(reserved), id, other)
	}

	// the first launch takes a slot; then another workload takes the last one while the node class's resolution
	// still shows it free: the second launch is refused by the reservation, caches that, and falls back
	first, err := f.provider.Create(testCtx(t), reservedClaim("nc-ra", "m5.large", stevedorev1.CapacityTypeReserved, stevedorev1.CapacityTypeOnDemand))
	if err != nil {
		t.Fatal(err)
	}
	if first.CapacityType != stevedorev1.CapacityTypeReserved || first.CapacityReservationID != id {
		t.Errorf("first launch: %s in reservation %q, want reserved in %s", first.CapacityType, first.CapacityReservationID, id)
	}
	nc, _ := f.provider.nodeClass(&stevedorev1.NodeClassReference{Name: "reserved"})
	if _, err := f.provider.Resolve(testCtx(t), nc); err != nil {
		t.Fatal(err)
	}
	if f.emu.EC2.RunInReservation(id) == nil {
		t.Fatal("the reservation had no slot left for another workload")
	}
	second, err := f.provider.Create(testCtx(t), reservedClaim("nc-rb", "m5.large", stevedorev1.CapacityTypeReserved, stevedorev1.CapacityTypeOnDemand))
	if err != nil {
		t.Fatal(err)
	}
	if second.CapacityType != stevedorev1.CapacityTypeOnDemand || second.CapacityReservationID != "" {
		t.Errorf("second launch: %s in reservation %q, want on-demand outside it", second.CapacityType, second.CapacityReservationID)
	}
	if r := f.emu.EC2.Reservation(id); r.Available != 0 {
		t.Errorf("reservation has %d instances free, want 0", r.Available)
	}
	// a NodeClaim that allows only reserved capacity cannot launch now
	if _, err := f.provider.Create(testCtx(t), reservedClaim("nc-only-reserved", "m5.large", stevedorev1.CapacityTypeReserved)); err == nil {
		t.Error("a reserved-only NodeClaim launched although the reservation is full")
	}
}

// TestACapacityBlockLaunchesAsOneAndExpiresBeforeItsEnd: a Capacity Block's launch uses the capacity-block market
// and target type; a block within 40 minutes of its end is expiring (no offering, state expiring) and its end is
// reported for the interruption controller.
func TestACapacityBlockLaunchesAsOneAndExpiresBeforeItsEnd(t *testing.T) {
	f := newFixture(t, nil)
	f.addReservedNodeClass(t)
	block := f.emu.EC2.AddCapacityBlock("p5.48xlarge", "us-east-1a", 1, time.Now().Add(3*time.Hour), map[string]string{"team": "ml"})
	inst, err := f.provider.Create(testCtx(t), reservedClaim("nc-block", "p5.48xlarge", stevedorev1.CapacityTypeReserved))
	if err != nil {
		t.Fatal(err)
	}
	if inst.CapacityReservationID != block || inst.CapacityReservationType != stevedorev1.ReservationTypeCapacityBlock {
		t.Errorf("launched in %q (%s), want Capacity Block %s", inst.CapacityReservationID, inst.CapacityReservationType, block)
	}
	if got := f.emu.EC2.LastRequest("CreateFleet").Get("TargetCapacitySpecification.DefaultTargetCapacityType"); got != "capacity-block" {
		t.Errorf("fleet target capacity type %q, want capacity-block", got)
	}
	ends, err := f.provider.CapacityBlockEnds(testCtx(t), []string{block})
	if err != nil {
		t.Fatal(err)
	}
	if end := ends[block]; end.IsZero() {
		t.Fatalf("no end reported for block %s", block)
	}

	soon := f.emu.EC2.AddCapacityBlock("p5.48xlarge", "us-east-1b", 2, f.clock.Now().Add(35*time.Minute), map[string]string{"team": "ml"})
	f.clock.Step(2 * discoveryTTL)
	nc, _ := f.provider.nodeClass(&stevedorev1.NodeClassReference{Name: "reserved"})
	res, err := f.provider.Resolve(testCtx(t), nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range reservationStatus(res.Reservations, f.clock.Now()) {
		if st.ID == soon && st.State != "expiring" {
			t.Errorf("block ending in 35 minutes has state %q, want expiring", st.State)
		}
	}
	its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("r").NodeClass("reserved").Obj())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.ReservationID == soon && o.Available {
				t.Errorf("the expiring block's offering is available")
			}
		}
	}
}
