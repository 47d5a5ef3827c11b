/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package commitment

import (
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

func savingsPlan(name, typ, family, hourly, discount string) *stevedorev1.Commitment {
	return &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: stevedorev1.CommitmentSpec{SavingsPlan: &stevedorev1.SavingsPlan{
		Type: typ, InstanceFamily: family, HourlyCommitment: hourly, DiscountPercent: discount}}}
}

func reserved(name, instanceType, zone string, count int32, rate string) *stevedorev1.Commitment {
	return &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: stevedorev1.CommitmentSpec{ReservedInstances: &stevedorev1.ReservedInstances{
		InstanceType: instanceType, Zone: zone, Count: count, HourlyRate: rate}}}
}

func mustCompile(t *testing.T, objs ...*stevedorev1.Commitment) []*Commitment {
	t.Helper()
	out, problems := CompileAll(objs)
	for name, err := range problems {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCompileRefusesWhatCannotApply(t *testing.T) {
	cases := []struct {
		name string
		obj  *stevedorev1.Commitment
		want string // "" when it compiles
	}{
		{"an EC2 Instance plan", savingsPlan("a", "EC2Instance", "m5", "2.5", "28"), ""},
		{"a Compute plan", savingsPlan("a", "Compute", "", "1", "17.5"), ""},
		{"an EC2 Instance plan without its family", savingsPlan("a", "EC2Instance", "", "2.5", "28"), "spec.savingsPlan.instanceFamily"},
		{"a discount of 100%", savingsPlan("a", "Compute", "", "1", "100"), "spec.savingsPlan.discountPercent"},
		{"a commitment that is no price", savingsPlan("a", "Compute", "", "lots", "20"), "spec.savingsPlan.hourlyCommitment"},
		{"an unknown plan type", savingsPlan("a", "SageMaker", "", "1", "20"), "spec.savingsPlan.type"},
		{"zonal reservations", reserved("a", "m5.xlarge", "us-east-1a", 2, "0.121"), ""},
		{"a reservation of no type", reserved("a", "m5", "", 2, ""), "spec.reservedInstances.instanceType"},
		{"a reservation of no instance", reserved("a", "m5.large", "", 0, ""), "spec.reservedInstances.count"},
		{"a rate that is no price", reserved("a", "m5.large", "", 1, "cheap"), "spec.reservedInstances.hourlyRate"},
		{"neither", &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, "spec: set exactly one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.obj)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestUseIsWhatAnInstanceTakesOfACommitment(t *testing.T) {
	cases := []struct {
		name               string
		obj                *stevedorev1.Commitment
		instanceType, zone string
		list               float64
		want               float64
		covers             bool
		unit               string
		capacity           float64
	}{
		{"an EC2 Instance plan covers its family at its rate", savingsPlan("sp", "EC2Instance", "m5", "2", "25"), "m5.xlarge", "us-east-1b", 0.192, 0.144, true, "$/h", 2},
		{"... and not another family", savingsPlan("sp", "EC2Instance", "m5", "2", "25"), "m6i.xlarge", "us-east-1b", 0.192, 0, false, "$/h", 2},
		{"a Compute plan covers any family", savingsPlan("sp", "Compute", "", "2", "20"), "c7g.large", "us-east-1b", 0.0725, 0.058, true, "$/h", 2},
		{"a zonal reservation covers its type in its zone", reserved("ri", "m5.xlarge", "us-east-1a", 3, ""), "m5.xlarge", "us-east-1a", 0.192, 1, true, "instances", 3},
		{"... and not in another zone", reserved("ri", "m5.xlarge", "us-east-1a", 3, ""), "m5.xlarge", "us-east-1b", 0.192, 0, false, "instances", 3},
		{"... nor another size", reserved("ri", "m5.xlarge", "us-east-1a", 3, ""), "m5.2xlarge", "us-east-1a", 0.384, 0, false, "instances", 3},
		{"a regional reservation covers its family by normalized units", reserved("ri", "m5.xlarge", "", 3, ""), "m5.2xlarge", "us-east-1c", 0.384, 16, true, "units", 24},
		{"... a large is four units", reserved("ri", "m5.xlarge", "", 3, ""), "m5.large", "us-east-1c", 0.096, 4, true, "units", 24},
		{"... not another family", reserved("ri", "m5.xlarge", "", 3, ""), "m5a.large", "us-east-1c", 0.086, 0, false, "units", 24},
		{"... not a metal size", reserved("ri", "m5.xlarge", "", 3, ""), "m5.metal", "us-east-1c", 4.608, 0, false, "units", 24},
		{"a regional reservation of metal covers that type only", reserved("ri", "m5.metal", "", 1, ""), "m5.metal", "us-east-1c", 4.608, 1, true, "instances", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, tc.obj)[0]
			got, ok := c.Use(tc.instanceType, tc.zone, tc.list)
			if ok != tc.covers || !near(got, tc.want) {
				t.Fatalf("Use = %v, %v; want %v, %v", got, ok, tc.want, tc.covers)
			}
			if c.Unit() != tc.unit || !near(c.Capacity(), tc.capacity) {
				t.Fatalf("capacity %v %s, want %v %s", c.Capacity(), c.Unit(), tc.capacity, tc.unit)
			}
		})
	}
}

// TestCoverSharesCommitmentsOutAsEC2Bills: reservations before Savings Plans, EC2 Instance plans before Compute
// ones, instances by name; an instance the room covers in part is covered for that fraction, the rest going to
// the next commitment; spot is never covered.
func TestCoverSharesCommitmentsOutAsEC2Bills(t *testing.T) {
	commitments := mustCompile(t,
		savingsPlan("a-compute", "Compute", "", "0.1", "20"),
		savingsPlan("b-m5", "EC2Instance", "m5", "0.2", "25"),
		reserved("c-ri", "m5.xlarge", "us-east-1a", 1, "0.12"),
	)
	instances := []Instance{
		{Name: "n4", InstanceType: "c5.xlarge", Zone: "us-east-1a", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.17},
		{Name: "n1", InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.192},
		{Name: "n2", InstanceType: "m5.xlarge", Zone: "us-east-1b", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.192},
		{Name: "n3", InstanceType: "m5.xlarge", Zone: "us-east-1b", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.192},
		{Name: "s1", InstanceType: "m5.xlarge", Zone: "us-east-1b", CapacityType: stevedorev1.CapacityTypeSpot, ListPrice: 0.07},
	}
	cov := Cover(commitments, instances)
	// c-ri covers n1 whole; b-m5 ($0.2 at $0.144 an m5.xlarge) covers n2 whole and 0.056/0.144 of n3; a-compute ($0.1
	// at 80%) covers the rest of n3 (0.088/0.1536 of its hour... but only what is left) and then n4 in part
	if got := cov.Covered["n1"]; !near(got, 1) {
		t.Errorf("n1 covered %v, want 1 (the zonal reservation)", got)
	}
	if got := cov.Covered["n2"]; !near(got, 1) {
		t.Errorf("n2 covered %v, want 1 (the m5 plan)", got)
	}
	// n3: the m5 plan's last 0.056 covers 0.056/0.144 of it; the Compute plan covers the rest (its use of n3 is
	// 0.1536 an hour, of which the uncovered share is taken)
	if got := cov.Covered["n3"]; !near(got, 1) {
		t.Errorf("n3 covered %v, want 1 (the m5 plan in part, the Compute plan for the rest)", got)
	}
	if _, ok := cov.Covered["s1"]; ok {
		t.Errorf("a spot instance is covered")
	}
	byName := map[string]Used{}
	for _, u := range cov.Commitments {
		byName[u.Name] = u
	}
	if u := byName["c-ri"]; !near(u.Used, 1) || u.Nodes != 1 {
		t.Errorf("c-ri used %v on %d nodes, want 1 on 1", u.Used, u.Nodes)
	}
	if u := byName["b-m5"]; !near(u.Used, 0.2) || u.Nodes != 2 {
		t.Errorf("b-m5 used %v on %d nodes, want 0.2 on 2", u.Used, u.Nodes)
	}
	n3Rest := (1 - 0.056/0.144) * 0.192 * 0.8
	if u := byName["a-compute"]; !near(u.Used, 0.1) || u.Nodes != 2 {
		t.Errorf("a-compute used %v on %d nodes, want 0.1 on 2 (n3's rest, %v, then n4 in part)", u.Used, u.Nodes, n3Rest)
	}
	wantN4 := (0.1 - n3Rest) / (0.17 * 0.8)
	if got := cov.Covered["n4"]; !near(got, wantN4) {
		t.Errorf("n4 covered %v, want %v", got, wantN4)
	}
	if !near(cov.OnDemand, 0.17+3*0.192) || !near(cov.Spot, 0.07) {
		t.Errorf("on-demand %v spot %v", cov.OnDemand, cov.Spot)
	}
	wantCovered := 3*0.192 + wantN4*0.17
	if !near(cov.CoveredOnDemand, wantCovered) {
		t.Errorf("covered on-demand %v, want %v", cov.CoveredOnDemand, wantCovered)
	}
	if wantBill := 0.1 + 0.2 + 0.12 + (cov.OnDemand - wantCovered) + 0.07; !near(cov.Bill(), wantBill) {
		t.Errorf("bill %v, want %v", cov.Bill(), wantBill)
	}
}

func TestCoverCountsFeesDeclaredAndThoseNot(t *testing.T) {
	cov := Cover(mustCompile(t, reserved("ri", "m5.large", "", 2, ""), reserved("ri2", "c5.large", "", 2, "0.05")), nil)
	if cov.FeesUnknown != 1 || !near(cov.Fees, 0.1) {
		t.Fatalf("fees %v, unknown %d; want 0.1 and 1", cov.Fees, cov.FeesUnknown)
	}
}

// TestOfferAddsTheCoveredOfferingsTheRoomStillTakes: an on-demand offering a commitment covers gets a covered twin
// at nearly nothing while the room left takes a whole instance; spot offerings, types the commitment does not
// cover, and offerings too large for the room left are not covered.
func TestOfferAddsTheCoveredOfferingsTheRoomStillTakes(t *testing.T) {
	offer := func(zone, ct string, price float64) cloud.Offering {
		return cloud.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
	}
	m5 := &cloud.InstanceType{Name: "m5.xlarge", Offerings: cloud.Offerings{offer("us-east-1a", "on-demand", 0.192), offer("us-east-1a", "spot", 0.07)}}
	m52 := &cloud.InstanceType{Name: "m5.2xlarge", Offerings: cloud.Offerings{offer("us-east-1a", "on-demand", 0.384)}}
	c5 := &cloud.InstanceType{Name: "c5.xlarge", Offerings: cloud.Offerings{offer("us-east-1a", "on-demand", 0.17)}}
	// $0.2 at 25% off: room for one m5.xlarge (0.144), not an m5.2xlarge (0.288)
	cov := Cover(mustCompile(t, savingsPlan("sp", "EC2Instance", "m5", "0.2", "25")), nil)
	out := Offer([]*cloud.InstanceType{m5, m52, c5}, cov)
	if out[1] != m52 || out[2] != c5 {
		t.Fatalf("types the room does not take were copied")
	}
	if len(m5.Offerings) != 2 {
		t.Fatalf("the catalog's type was changed")
	}
	offs := out[0].Offerings
	if len(offs) != 3 {
		t.Fatalf("offerings %+v, want the two and one covered", offs)
	}
	c := offs[2]
	if c.CapacityType != "on-demand" || c.Covered == nil || c.Covered.Commitment != "sp" || !near(c.Covered.Use, 0.144) ||
		!near(c.Covered.Room, 0.2) || !near(c.ListPrice(), 0.192) || c.Price >= 0.001 {
		t.Fatalf("covered offering %+v (%+v)", c, c.Covered)
	}
	best, _ := out[0].Offerings.Cheapest()
	if best.Covered == nil {
		t.Fatalf("the covered offering is not the cheapest: %+v", best)
	}
	if got := Offer([]*cloud.InstanceType{m5}, Coverage{}); got[0] != m5 {
		t.Fatalf("without commitments the types are not returned as they are")
	}
}

func TestEffectivePricesTheCoveredShareAtNearlyNothing(t *testing.T) {
	if got := Effective(0.2, 0); got != 0.2 {
		t.Errorf("uncovered: %v", got)
	}
	if got := Effective(0.2, 0.5); !near(got, 0.1+0.1*coveredPriceFactor) {
		t.Errorf("half covered: %v", got)
	}
	if got := Effective(0.2, 1); got > 1e-5 {
		t.Errorf("covered: %v", got)
	}
}
