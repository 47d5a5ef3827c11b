/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestEC2NodeClassNetworkAndVolumeSettingsReachTheLaunch: a public address and connection tracking put the
// security groups on a primary network interface that carries them; a volume created from a snapshot gets its
// initialization rate. Without either network setting, the security groups stay on the template.
func TestEC2NodeClassNetworkAndVolumeSettingsReachTheLaunch(t *testing.T) {
	f := newFixture(t, nil)
	size := resource.MustParse("20Gi")
	nc := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1", Generation: 2},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", AssociatePublicIPAddress: ptr.To(false),
			ConnectionTracking:         &stevedorev1.ConnectionTracking{TCPEstablishedTimeout: ptr.To[int32](3600), UDPTimeout: ptr.To[int32](45)},
			SubnetSelectorTerms:        []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			BlockDeviceMappings: []stevedorev1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda"), RootVolume: true,
				EBS: &stevedorev1.BlockDevice{VolumeSize: &size, SnapshotID: ptr.To("snap-0123456789abcdef0"), VolumeInitializationRate: ptr.To[int32](200)}}}}}
	f.addNodeClass(t, nc)
	if err := f.classes.Update(nc); err != nil {
		t.Fatal(err)
	}
	inst, err := f.provider.Create(testCtx(t), claim("nc-net", in(corev1.LabelInstanceTypeStable, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	lt := f.emu.EC2.Instance(inst.ID).LaunchTemplate
	if len(lt.SecurityGroupIDs) != 0 || len(lt.NetworkInterfaces) != 1 {
		t.Fatalf("template security groups %v, interfaces %+v: want the groups on one interface", lt.SecurityGroupIDs, lt.NetworkInterfaces)
	}
	ni := lt.NetworkInterfaces[0]
	if ni.DeviceIndex != 0 || len(ni.SecurityGroups) == 0 || ni.AssociatePublicIP != "false" || ni.TCPEstablishedTimeout != 3600 ||
		ni.UDPTimeout != 45 || ni.UDPStreamTimeout != 0 {
		t.Errorf("primary interface %+v", ni)
	}
	if bd := lt.BlockDevices[0]; bd.VolumeInitializationRate != 200 || bd.SnapshotID != "snap-0123456789abcdef0" {
		t.Errorf("root volume %+v, want initialized at 200 MiB/s from its snapshot", bd)
	}
}

// TestTypesCarryKarpentersProcessorLabelsAndNodesTheirZoneID: the labels Karpenter derives from
// DescribeInstanceTypes are on the types the provider reads from EC2, every offering knows its zone's ID, and a
// launched instance carries the ID of its zone.
func TestTypesCarryKarpentersProcessorLabelsAndNodesTheirZoneID(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testCtx(t)
	its, err := f.provider.InstanceTypes(ctx, test.NodePool("default").Obj())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"m7i-flex.large": {stevedorev1.LabelInstanceCPUManufacturer: "intel", stevedorev1.LabelInstanceCPUSustainedClockSpeed: "3200",
			stevedorev1.LabelInstanceEBSBandwidth: "10000", stevedorev1.LabelInstanceEncryptionInTransit: "true",
			stevedorev1.LabelInstanceCapabilityFlex: "true", stevedorev1.LabelInstanceTenancy: "default"},
		"m6g.large": {stevedorev1.LabelInstanceCPUManufacturer: "aws", stevedorev1.LabelInstanceCapabilityFlex: "false"},
		"c5.large":  {stevedorev1.LabelInstanceEncryptionInTransit: "false", stevedorev1.LabelInstanceCPUManufacturer: "intel"},
	}
	seen := 0
	for _, it := range its {
		labels, ok := want[it.Name]
		if !ok {
			continue
		}
		seen++
		for k, v := range labels {
			if got := it.Labels()[k]; got != v {
				t.Errorf("%s: %s = %q, want %q", it.Name, k, got, v)
			}
		}
		for _, o := range it.Offerings {
			if !strings.HasPrefix(o.ZoneID, "use1-az") {
				t.Errorf("%s in %s: zone ID %q", it.Name, o.Zone, o.ZoneID)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of the %d types checked", seen, len(want))
	}
	inst, err := f.provider.Create(ctx, claim("nc-zone", in(corev1.LabelInstanceTypeStable, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	zoneIDs := map[string]string{}
	for _, it := range its {
		for _, o := range it.Offerings {
			zoneIDs[o.Zone] = o.ZoneID
		}
	}
	if inst.ZoneID == "" || inst.ZoneID != zoneIDs[inst.Zone] {
		t.Errorf("launched %s in %s with zone ID %q, want %q", inst.ID, inst.Zone, inst.ZoneID, zoneIDs[inst.Zone])
	}
}

// TestAReservationSaysWhetherItIsInterruptible: a reservation its owner marked interruptible is so in the
// resolution, and the instance launched into it carries the label.
func TestAReservationSaysWhetherItIsInterruptible(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testCtx(t)
	id := f.emu.EC2.AddCapacityBlock("p5.48xlarge", "us-east-1a", 1, f.clock.Now().Add(24*time.Hour), map[string]string{"team": "ml"})
	f.emu.EC2.SetInterruptible(id, true)
	nc := aliasClass("reserved", "")
	nc.Spec.CapacityReservationSelectorTerms = []stevedorev1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"},
		InstanceMatchCriteria: "targeted"}}
	res, err := f.provider.Resolve(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reservations) != 1 || !res.Reservations[0].Interruptible || res.Reservations[0].MatchCriteria != "targeted" {
		t.Fatalf("reservations %+v, want the interruptible targeted one", res.Reservations)
	}
	nc.Spec.CapacityReservationSelectorTerms[0].InstanceMatchCriteria = "open"
	nc.Generation++
	if res, err := f.provider.Resolve(ctx, nc); err != nil || len(res.Reservations) != 0 {
		t.Errorf("an open-only term found %+v (%v), want none", res, err)
	}
}
