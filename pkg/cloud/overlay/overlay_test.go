/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package overlay

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// testTypes are m5.large, m5.2xlarge and c5.large of the embedded catalog, each offered on-demand and spot in
// us-east-1a and us-east-1b at fixed prices (on-demand 1.0, spot 0.5, the zone b offerings 0.01 more), so that
// every expected price can be read off the case.
func testTypes(t *testing.T) []*cloud.InstanceType {
	t.Helper()
	var out []*cloud.InstanceType
	for _, ct := range catalog.Default().InstanceTypes {
		switch ct.Name {
		case "m5.large", "m5.2xlarge", "c5.large":
		default:
			continue
		}
		ct.Offerings = []catalog.Offering{
			{Zone: "us-east-1a", CapacityType: "on-demand", Price: 1.0}, {Zone: "us-east-1a", CapacityType: "spot", Price: 0.5},
			{Zone: "us-east-1b", CapacityType: "on-demand", Price: 1.01}, {Zone: "us-east-1b", CapacityType: "spot", Price: 0.51},
		}
		it, err := cloud.NewInstanceType(ct, cloud.DefaultOverheadModel(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	if len(out) != 3 {
		t.Fatalf("found %d of the 3 test types in the catalog", len(out))
	}
	return out
}

type ov struct {
	name, price, adjust string
	weight              int32
	reqs                []stevedorev1.NodeOverlayRequirement
	capacity            corev1.ResourceList
}

func (o ov) obj() *stevedorev1.NodeOverlay {
	no := &stevedorev1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: o.name},
		Spec: stevedorev1.NodeOverlaySpec{Requirements: o.reqs, Capacity: o.capacity}}
	if o.price != "" {
		no.Spec.Price = &o.price
	}
	if o.adjust != "" {
		no.Spec.PriceAdjustment = &o.adjust
	}
	if o.weight != 0 {
		no.Spec.Weight = &o.weight
	}
	return no
}

func req(key, op string, values ...string) stevedorev1.NodeOverlayRequirement {
	return stevedorev1.NodeOverlayRequirement{Key: key, Operator: op, Values: values}
}

// price of an offering "type/zone/capacity type" after the overlays
type priceCheck struct {
	offering string
	want     float64
}

func TestOverlaysPriceAndSizeTheOfferingsTheySelect(t *testing.T) {
	family := func(f string) stevedorev1.NodeOverlayRequirement {
		return req(stevedorev1.LabelInstanceFamily, "In", f)
	}
	hugepages := corev1.ResourceList{"hugepages-2Mi": resource.MustParse("1Gi")}
	tests := []struct {
		name     string
		pool     string
		overlays []ov
		prices   []priceCheck
		// capacity: type name -> the hugepages-2Mi it reports ("" for none)
		capacity     map[string]string
		wantProblems map[string]string
	}{
		{name: "none", prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 1.0}, {"c5.large/us-east-1b/spot", 0.51}}},
		{name: "a percentage off a family", overlays: []ov{{name: "m5-discount", adjust: "-10%", reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 0.9}, {"m5.2xlarge/us-east-1b/spot", 0.459}, {"c5.large/us-east-1a/on-demand", 1.0}}},
		{name: "a price for spot only", overlays: []ov{{name: "spot", price: "0.02", reqs: []stevedorev1.NodeOverlayRequirement{req(stevedorev1.LabelCapacityType, "In", "spot")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/spot", 0.02}, {"c5.large/us-east-1b/spot", 0.02}, {"m5.large/us-east-1a/on-demand", 1.0}}},
		{name: "one zone", overlays: []ov{{name: "zone-b-fee", adjust: "+0.5", reqs: []stevedorev1.NodeOverlayRequirement{req(corev1.LabelTopologyZone, "In", "us-east-1b")}}},
			prices: []priceCheck{{"m5.large/us-east-1b/on-demand", 1.51}, {"m5.large/us-east-1a/on-demand", 1.0}}},
		{name: "never below zero", overlays: []ov{{name: "free", adjust: "-100%", reqs: []stevedorev1.NodeOverlayRequirement{family("c5")}},
			{name: "credit", adjust: "-0.75", reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices: []priceCheck{{"c5.large/us-east-1a/on-demand", 0}, {"m5.large/us-east-1a/spot", 0}, {"m5.large/us-east-1a/on-demand", 0.25}}},
		{name: "the higher weight decides", overlays: []ov{{name: "a-low", adjust: "-50%", weight: 1}, {name: "b-high", adjust: "+50%", weight: 10, reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 1.5}, {"c5.large/us-east-1a/on-demand", 0.5}}},
		{name: "same weight, different prices, can select the same offerings: the later name is left out",
			overlays:     []ov{{name: "a", adjust: "-50%"}, {name: "b", adjust: "+50%", reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices:       []priceCheck{{"m5.large/us-east-1a/on-demand", 0.5}},
			wantProblems: map[string]string{"b": "conflicts with NodeOverlay a"}},
		{name: "same weight, disjoint requirements: no conflict",
			overlays: []ov{{name: "a", adjust: "-50%", reqs: []stevedorev1.NodeOverlayRequirement{family("c5")}}, {name: "b", adjust: "+50%", reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices:   []priceCheck{{"m5.large/us-east-1a/on-demand", 1.5}, {"c5.large/us-east-1a/on-demand", 0.5}}},
		{name: "same weight, same price: no conflict",
			overlays: []ov{{name: "a", adjust: "-50%"}, {name: "b", adjust: "-50%", reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices:   []priceCheck{{"m5.large/us-east-1a/on-demand", 0.5}}},
		{name: "capacity for the selected types", overlays: []ov{{name: "hugepages", capacity: hugepages, reqs: []stevedorev1.NodeOverlayRequirement{family("m5")}}},
			prices:   []priceCheck{{"m5.large/us-east-1a/on-demand", 1.0}},
			capacity: map[string]string{"m5.large": "1Gi", "m5.2xlarge": "1Gi", "c5.large": ""}},
		{name: "capacity of the higher weight", overlays: []ov{{name: "small", capacity: hugepages, weight: 1},
			{name: "large", capacity: corev1.ResourceList{"hugepages-2Mi": resource.MustParse("4Gi")}, weight: 2, reqs: []stevedorev1.NodeOverlayRequirement{req(stevedorev1.LabelInstanceCPU, "Gte", "8")}}},
			capacity: map[string]string{"m5.large": "1Gi", "m5.2xlarge": "4Gi", "c5.large": "1Gi"}},
		{name: "Lte on an integer label", overlays: []ov{{name: "small-types", price: "0.1", reqs: []stevedorev1.NodeOverlayRequirement{req(stevedorev1.LabelInstanceCPU, "Lte", "2")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 0.1}, {"m5.2xlarge/us-east-1a/on-demand", 1.0}}},
		{name: "a NodePool by Karpenter's label", pool: "batch", overlays: []ov{{name: "batch-only", adjust: "+1", reqs: []stevedorev1.NodeOverlayRequirement{req("karpenter.sh/nodepool", "In", "batch")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 2.0}}},
		{name: "another NodePool", pool: "web", overlays: []ov{{name: "batch-only", adjust: "+1", reqs: []stevedorev1.NodeOverlayRequirement{req(stevedorev1.LabelNodePool, "In", "batch")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 1.0}}},
		{name: "the NodePool's template labels", pool: "web", overlays: []ov{{name: "team", adjust: "+1", reqs: []stevedorev1.NodeOverlayRequirement{req("team", "In", "payments")}},
			{name: "other-team", adjust: "+2", weight: 5, reqs: []stevedorev1.NodeOverlayRequirement{req("team", "In", "search")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 2.0}}},
		{name: "a label no node has", overlays: []ov{{name: "gpu-fee", adjust: "+1", reqs: []stevedorev1.NodeOverlayRequirement{req("example.com/accelerator", "Exists")}}},
			prices: []priceCheck{{"m5.large/us-east-1a/on-demand", 1.0}}},
		{name: "an invalid overlay is left out, saying why", overlays: []ov{{name: "cpu", capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			wantProblems: map[string]string{"cpu": "spec.capacity: cpu cannot be set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := tc.pool
			if pool == "" {
				pool = "default"
			}
			np := &stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "payments"}
			var list []*stevedorev1.NodeOverlay
			for _, o := range tc.overlays {
				list = append(list, o.obj())
			}
			set := NewSet(list)
			for name, want := range tc.wantProblems {
				if !strings.Contains(set.Problems[name], want) {
					t.Errorf("problem of %s: %q, want it to say %q", name, set.Problems[name], want)
				}
			}
			if len(set.Problems) != len(tc.wantProblems) {
				t.Errorf("problems %v, want %v", set.Problems, tc.wantProblems)
			}
			base := testTypes(t)
			got := set.Apply(np, base)
			byName := map[string]*cloud.InstanceType{}
			for _, it := range got {
				byName[it.Name] = it
			}
			for _, pc := range tc.prices {
				parts := strings.Split(pc.offering, "/")
				it := byName[parts[0]]
				found := false
				for _, o := range it.Offerings {
					if o.Zone == parts[1] && o.CapacityType == parts[2] {
						found = true
						if math.Abs(o.Price-pc.want) > 1e-9 {
							t.Errorf("%s costs %v, want %v", pc.offering, o.Price, pc.want)
						}
					}
				}
				if !found {
					t.Fatalf("no offering %s", pc.offering)
				}
			}
			for name, want := range tc.capacity {
				q, ok := byName[name].Allocatable()["hugepages-2Mi"]
				if want == "" && ok || want != "" && (!ok || q.Cmp(resource.MustParse(want)) != 0) {
					t.Errorf("%s has hugepages-2Mi %v (present %t), want %q", name, q.String(), ok, want)
				}
			}
			// the types given are never changed
			for _, it := range base {
				if _, ok := it.Capacity["hugepages-2Mi"]; ok || it.Offerings[0].Price != 1.0 {
					t.Errorf("%s was changed in place", it.Name)
				}
			}
		})
	}
}
