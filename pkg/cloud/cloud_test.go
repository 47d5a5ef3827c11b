/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cloud

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

func catalogType(t *testing.T, name string) catalog.InstanceType {
	t.Helper()
	for _, it := range catalog.Default().InstanceTypes {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("%s is not in the default catalog", name)
	return catalog.InstanceType{}
}

func TestAllocatableFollowsTheEKSOverheadModel(t *testing.T) {
	cases := []struct {
		name                string
		kubelet             *stevedorev1.KubeletConfiguration
		wantCPU, wantMemory string
		wantPods            int64
	}{
		// m5.large: 2 vCPU, 8 GiB, 3 ENIs x 10 IPv4 -> 29 pods. Memory: 8192 MiB less 7.5% = 7577 MiB, less
		// kube-reserved 11*29+255 = 574 MiB and the 100 MiB eviction threshold = 6903 MiB. CPU: 2000m - 70m.
		{"defaults", nil, "1930m", "6903Mi", 29},
		// maxPods 110: kube-reserved memory 11*110+255 = 1465 MiB -> 7577-1465-100 = 6012 MiB.
		{"kubelet maxPods", &stevedorev1.KubeletConfiguration{MaxPods: ptr(int32(110))}, "1930m", "6012Mi", 110},
		{"kube and system reserved", &stevedorev1.KubeletConfiguration{
			KubeReserved: map[string]string{"cpu": "200m", "memory": "500Mi"}, SystemReserved: map[string]string{"memory": "200Mi"},
			EvictionHard: map[string]string{"memory.available": "500Mi"}}, "1800m", "6377Mi", 29},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := DefaultOverheadModel()
			m.Kubelet = tc.kubelet
			it, err := NewInstanceType(catalogType(t, "m5.large"), m, nil)
			if err != nil {
				t.Fatal(err)
			}
			alloc := it.Allocatable()
			if got := alloc[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("cpu = %s, want %s", got.String(), tc.wantCPU)
			}
			if got := alloc[corev1.ResourceMemory]; got.Cmp(resource.MustParse(tc.wantMemory)) != 0 {
				t.Errorf("memory = %s, want %s", got.String(), tc.wantMemory)
			}
			if got := alloc[corev1.ResourcePods]; got.Value() != tc.wantPods {
				t.Errorf("pods = %d, want %d", got.Value(), tc.wantPods)
			}
		})
	}
}

func TestKubeReservedCPU(t *testing.T) {
	for vcpu, want := range map[int]int64{1: 60, 2: 70, 4: 80, 8: 90, 96: 310} {
		if got := KubeReservedCPU(vcpu); got != want {
			t.Errorf("KubeReservedCPU(%d) = %d, want %d", vcpu, got, want)
		}
	}
}

func TestInstanceTypeLabelsAndOfferings(t *testing.T) {
	it, err := NewInstanceType(catalogType(t, "m7g.xlarge"), DefaultOverheadModel(), map[string]bool{"us-east-1a": true, "us-east-1b": true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		corev1.LabelInstanceTypeStable: "m7g.xlarge", corev1.LabelArchStable: "arm64",
		stevedorev1.LabelInstanceCategory: "m", stevedorev1.LabelInstanceFamily: "m7g", stevedorev1.LabelInstanceGeneration: "7",
		stevedorev1.LabelInstanceSize: "xlarge", stevedorev1.LabelInstanceCPU: "4", stevedorev1.LabelInstanceMemory: "16384",
		stevedorev1.LabelInstanceHypervisor: "nitro",
	}
	labels := it.Requirements.Labels()
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	if len(it.Offerings) != 4 {
		t.Fatalf("offerings = %v, want spot and on-demand in two zones", it.Offerings)
	}
	spotB := it.Offerings.Compatible(scheduling.NewRequirements(
		scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot"),
		scheduling.MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")))
	if len(spotB) != 1 || spotB[0].Zone != "us-east-1b" || spotB[0].CapacityType != "spot" {
		t.Fatalf("compatible = %v", spotB)
	}
	cheapest, _ := it.Offerings.Cheapest()
	if cheapest.CapacityType != "spot" {
		t.Errorf("cheapest offering %v, want a spot one", cheapest)
	}
}

func TestUnavailableOfferingsExpireAfterTheirTTL(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	u := NewUnavailableOfferings(clk)
	u.Mark("m5.large", "us-east-1a", "spot")
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.IsUnavailable("m5.large", "us-east-1b", "spot") {
		t.Fatal("only the marked offering must be unavailable")
	}
	if u.Len() != 1 {
		t.Fatalf("Len = %d", u.Len())
	}
	clk.SetTime(clk.Now().Add(UnavailableTTL - time.Second))
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Fatal("still within the TTL")
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.Len() != 0 {
		t.Fatal("the mark must expire after the TTL")
	}
}

func ptr[T any](v T) *T { return &v }

// TestRAID0InstanceStoreIsTheEphemeralStorage: with instanceStorePolicy RAID0 a type with NVMe instance store has
// the store's size as ephemeral-storage capacity; a type without keeps the root volume's, as does every type
// without the policy.
func TestRAID0InstanceStoreIsTheEphemeralStorage(t *testing.T) {
	for _, tc := range []struct {
		name string
		raid bool
		want string
	}{
		{"g4dn.xlarge", true, ""}, {"g4dn.xlarge", false, "20Gi"}, {"m5.large", true, "20Gi"},
	} {
		ct := catalogType(t, tc.name)
		want := tc.want
		if want == "" {
			if ct.LocalNVMeGB == 0 {
				t.Fatalf("%s has no instance store in the catalog", tc.name)
			}
			want = resource.NewScaledQuantity(int64(ct.LocalNVMeGB), resource.Giga).String()
		}
		m := DefaultOverheadModel()
		m.InstanceStoreRAID0 = tc.raid
		it, err := NewInstanceType(ct, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := it.Capacity[corev1.ResourceEphemeralStorage]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s, RAID0 %t: ephemeral-storage %s, want %s", tc.name, tc.raid, got.String(), want)
		}
	}
}

func TestOfferingPrice(t *testing.T) {
	its := []*InstanceType{
		{Name: "m5.large", Offerings: []Offering{{Zone: "a", CapacityType: "on-demand", Price: 0.096}, {Zone: "a", CapacityType: "spot", Price: 0.04}}},
		{Name: "c5.large", Offerings: []Offering{{Zone: "b", CapacityType: "on-demand", Price: 0.085}}},
	}
	cases := []struct {
		name, typ, zone, ct string
		want                float64
		found               bool
	}{
		{"the type's offering in the zone", "m5.large", "a", "spot", 0.04, true},
		{"another type of the list", "c5.large", "b", "on-demand", 0.085, true},
		{"a zone the type is not offered in", "m5.large", "b", "on-demand", 0, false},
		{"a type not in the list", "r5.large", "a", "on-demand", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, found := OfferingPrice(its, tc.typ, tc.zone, tc.ct)
			if got != tc.want || found != tc.found {
				t.Errorf("OfferingPrice = %v, %v; want %v, %v", got, found, tc.want, tc.found)
			}
		})
	}
}
