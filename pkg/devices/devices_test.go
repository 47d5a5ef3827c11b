/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package devices

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

func TestSlicesModelWhatNVIDIAsDriverPublishesForEachType(t *testing.T) {
	byName := catalogTypes(t)
	for _, tc := range []struct {
		typ, product, architecture, capability, memory string
		gpus                                           int
	}{
		{typ: "m7i.large"},
		{typ: "g4ad.8xlarge"}, // AMD GPUs: no driver modelled
		{typ: "inf2.xlarge"},  // Neuron devices, no GPU
		{typ: "g4dn.xlarge", gpus: 1, product: "Tesla T4", architecture: "Turing", capability: "7.5.0", memory: "16Gi"},
		{typ: "g5.12xlarge", gpus: 4, product: "NVIDIA A10G", architecture: "Ampere", capability: "8.6.0", memory: "22888Mi"},
		{typ: "g6e.12xlarge", gpus: 4, product: "NVIDIA L40S", architecture: "Ada Lovelace", capability: "8.9.0", memory: "45776Mi"},
		{typ: "p4d.24xlarge", gpus: 8, product: "NVIDIA A100-SXM4-40GB", architecture: "Ampere", capability: "8.0.0", memory: "40Gi"},
		{typ: "p4de.24xlarge", gpus: 8, product: "NVIDIA A100-SXM4-80GB", architecture: "Ampere", capability: "8.0.0", memory: "80Gi"},
		{typ: "p5.48xlarge", gpus: 8, product: "NVIDIA H100 80GB HBM3", architecture: "Hopper", capability: "9.0.0", memory: "80Gi"},
		{typ: "p3dn.24xlarge", gpus: 8, product: "Tesla V100-SXM2-32GB", architecture: "Volta", capability: "7.0.0", memory: "32Gi"},
	} {
		it := byName[tc.typ]
		if it == nil {
			t.Errorf("the catalog has no %s", tc.typ)
			continue
		}
		var got []*resourceapi.ResourceSlice
		for _, slice := range Slices("node-a", it.Labels(), 0) {
			if slice.Spec.Driver == DriverNVIDIA {
				got = append(got, slice)
			}
		}
		if tc.gpus == 0 {
			if len(got) != 0 {
				t.Errorf("%s: got %d slices, want none", tc.typ, len(got))
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: got %d slices, want one of %s", tc.typ, len(got), DriverNVIDIA)
			continue
		}
		s := got[0].Spec
		if s.Driver != DriverNVIDIA || s.NodeName == nil || *s.NodeName != "node-a" || s.Pool.Name != "node-a" || len(s.Devices) != tc.gpus {
			t.Errorf("%s: slice %+v, want %d devices of %s on node-a in pool node-a", tc.typ, s, tc.gpus, DriverNVIDIA)
			continue
		}
		for i, d := range s.Devices {
			a := d.Attributes
			mem := d.Capacity["memory"].Value
			if want := "gpu-" + string(rune('0'+i)); d.Name != want || *a["type"].StringValue != "gpu" || *a["productName"].StringValue != tc.product ||
				*a["architecture"].StringValue != tc.architecture || *a["cudaComputeCapability"].VersionValue != tc.capability || mem.String() != tc.memory {
				t.Errorf("%s: device %d is %s %v memory %s; want %s, %s, %s, %s, %s", tc.typ, i, d.Name, a, mem.String(), want, tc.product, tc.architecture, tc.capability, tc.memory)
			}
		}
	}
}

func TestSlicesModelNeuronDevicesAndTheEFAInterfacesAttached(t *testing.T) {
	byName := catalogTypes(t)
	for _, tc := range []struct {
		typ    string
		efa    int
		neuron int
	}{
		{typ: "m7i.large"},
		{typ: "inf2.xlarge", neuron: 1},
		{typ: "inf2.48xlarge", neuron: 12},
		{typ: "trn1.32xlarge", neuron: 16, efa: 8},
		{typ: "p4d.24xlarge", efa: 4},
		{typ: "p4d.24xlarge"}, // launched without EFA interfaces: no EFA devices
	} {
		it := byName[tc.typ]
		if it == nil {
			t.Fatalf("the catalog has no %s", tc.typ)
		}
		got, byDriver := map[string]*resourceapi.ResourceSlice{}, map[string][]resourceapi.Device{}
		for _, s := range Slices("node-a", it.Labels(), tc.efa) {
			got[s.Spec.Driver], byDriver[s.Spec.Driver] = s, s.Spec.Devices
		}
		if n := len(byDriver[DriverNeuron]); n != tc.neuron {
			t.Errorf("%s: %d Neuron devices, want %d", tc.typ, n, tc.neuron)
		}
		for i, d := range byDriver[DriverNeuron] {
			a := d.Attributes
			if d.Name != fmt.Sprintf("neuron-device-%d", i) || *a["deviceId"].IntValue != int64(i) || *a["instanceType"].StringValue != tc.typ ||
				*a["resourceType"].StringValue != "neuron_device" {
				t.Errorf("%s: Neuron device %d is %s %v", tc.typ, i, d.Name, a)
			}
		}
		if n := len(byDriver[DriverEFA]); n != tc.efa {
			t.Errorf("%s with %d EFA interfaces: %d EFA devices", tc.typ, tc.efa, n)
		}
		for i, d := range byDriver[DriverEFA] {
			a := d.Attributes
			if *a["pciDevice"].StringValue != "Elastic Fabric Adapter (EFA)" || *a["pciSubsystem"].StringValue != fmt.Sprintf("efa%d", i) || !*a["rdma"].BoolValue {
				t.Errorf("%s: EFA device %d is %s %v", tc.typ, i, d.Name, a)
			}
		}
		for driver, s := range got {
			if s.Spec.Pool.Name != "node-a" || s.Spec.NodeName == nil || *s.Spec.NodeName != "node-a" {
				t.Errorf("%s: the %s slice is not node-a's pool on node-a: %+v", tc.typ, driver, s.Spec)
			}
		}
	}
}

// catalogTypes are the embedded catalog's instance types, by name.
func catalogTypes(t *testing.T) map[string]*cloud.InstanceType {
	t.Helper()
	types, err := cloud.CatalogInstanceTypes(catalog.Default(), nil, 0.075)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cloud.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	return byName
}
