/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestPodsRequestingEFALaunchWithEveryEFAInterfaceOfTheType: a NodeClaim whose pods request vpc.amazonaws.com/efa
// launches with as many EFA interfaces as the type takes, one per network card (the first the primary interface,
// device 0; the others device 1), each holding the security groups. Types that take different counts get a launch
// template each, in one fleet; a NodeClaim whose pods request no EFA launches with the usual single interface.
func TestPodsRequestingEFALaunchWithEveryEFAInterfaceOfTheType(t *testing.T) {
	cases := []struct {
		name    string
		types   []string
		request string // vpc.amazonaws.com/efa the pods request, "" for none
		// wantEFA by type launched; wantTemplates is how many launch templates the fleet names
		wantEFA       map[string]int
		wantTemplates int
	}{
		{name: "four EFA interfaces of a p4d", types: []string{"p4d.24xlarge"}, request: "4", wantEFA: map[string]int{"p4d.24xlarge": 4},
			wantTemplates: 1},
		{name: "types taking different counts", types: []string{"p4d.24xlarge", "g6e.24xlarge"}, request: "2",
			wantEFA: map[string]int{"p4d.24xlarge": 4, "g6e.24xlarge": 2}, wantTemplates: 2},
		{name: "no EFA requested", types: []string{"p4d.24xlarge"}, wantEFA: map[string]int{"p4d.24xlarge": 0}, wantTemplates: 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			w := test.NodeClaim(fmt.Sprintf("nc-efa-%d", i), "default").Labels("team", "a")
			if tc.request != "" {
				w = w.Requests(stevedorev1.ResourceEFA, tc.request, "nvidia.com/gpu", "8")
			}
			c := w.Obj()
			c.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{in(corev1.LabelInstanceTypeStable, tc.types...),
				in(stevedorev1.LabelCapacityType, "on-demand")}
			inst, err := f.provider.Create(testCtx(t), c)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := tc.wantEFA[inst.Type]
			if !ok {
				t.Fatalf("launched a %s, want one of %v", inst.Type, tc.types)
			}
			nis := f.emu.EC2.Instance(inst.ID).LaunchTemplate.NetworkInterfaces
			efa := 0
			for _, ni := range nis {
				if ni.InterfaceType == "efa" {
					efa++
				}
			}
			if efa != want {
				t.Fatalf("a %s launched with %d EFA interfaces (%+v), want %d", inst.Type, efa, nis, want)
			}
			for card, ni := range nis {
				wantDevice := min(card, 1)
				if ni.NetworkCardIndex != card || ni.DeviceIndex != wantDevice || len(ni.SecurityGroups) == 0 {
					t.Errorf("interface %d: card %d device %d security groups %v, want card %d device %d with the node class's groups",
						card, ni.NetworkCardIndex, ni.DeviceIndex, ni.SecurityGroups, card, wantDevice)
				}
			}
			fleet := f.emu.EC2.LastRequest("CreateFleet")
			templates := 0
			for n := 1; fleet.Get(fmt.Sprintf("LaunchTemplateConfigs.%d.LaunchTemplateSpecification.LaunchTemplateName", n)) != ""; n++ {
				templates++
			}
			if templates != tc.wantTemplates {
				t.Errorf("the fleet names %d launch templates, want %d: %v", templates, tc.wantTemplates, fleet)
			}
		})
	}
}

// TestTheEmulatorRefusesEFAInterfacesATypeCannotTake: EC2 refuses a launch template's EFA interfaces on a type
// without EFA, or more of them than the type takes, as an error of the fleet's pool; the emulator does the same, so
// a launch path that got the count wrong fails in the sandbox too.
func TestTheEmulatorRefusesEFAInterfacesATypeCannotTake(t *testing.T) {
	for _, tc := range []struct {
		instanceType string
		efa          int32
		wantRefused  bool
	}{{"m5.large", 1, true}, {"g6e.24xlarge", 4, true}, {"g6e.24xlarge", 2, false}, {"p4d.24xlarge", 4, false}} {
		t.Run(fmt.Sprintf("%s with %d", tc.instanceType, tc.efa), func(t *testing.T) {
			f := newFixture(t, nil)
			c := claim("nc-1", in(corev1.LabelInstanceTypeStable, tc.instanceType), in(stevedorev1.LabelCapacityType, "on-demand"))
			nc, res, err := f.provider.readyClass(testCtx(t), c.Spec.NodeClassRef)
			if err != nil {
				t.Fatal(err)
			}
			sub, _ := res.SubnetFor("us-east-1a")
			o := override{instanceType: tc.instanceType, image: imageKey("amd64", ""), zone: "us-east-1a", subnetID: sub.ID, efa: tc.efa}
			if tc.instanceType != "m5.large" {
				o.image = imageKey("amd64", "nvidia")
			}
			result, err := f.provider.launchFleet(testCtx(t), c, nc, res, []override{o}, stevedorev1.CapacityTypeOnDemand)
			if err != nil {
				t.Fatal(err)
			}
			refused := result.instanceID == ""
			if refused != tc.wantRefused {
				t.Errorf("refused = %v (errors %+v), want %v", refused, result.errors, tc.wantRefused)
			}
			if refused && (len(result.errors) != 1 || result.errors[0].code != "InvalidParameterCombination") {
				t.Errorf("errors %+v, want one InvalidParameterCombination", result.errors)
			}
		})
	}
}
