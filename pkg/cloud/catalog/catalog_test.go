/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package catalog

import (
	"slices"
	"strings"
	"testing"
)

func TestDefaultCatalogCoversEveryCurrentFamily(t *testing.T) {
	c := Default()
	if c.Region != "us-east-1" {
		t.Errorf("region = %q", c.Region)
	}
	byName := map[string]InstanceType{}
	families := map[string]bool{}
	for _, it := range c.InstanceTypes {
		byName[it.Name] = it
		families[strings.Split(it.Name, ".")[0]] = true
	}
	for _, f := range []string{"t3", "t3a", "t4g", "m5", "c6a", "r6g", "m7i", "c7g", "m8g", "r8a", // general, compute, memory
		"m6id", "c6in", "r5b", "m7i-flex", "x2idn", "z1d", "i4i", "i7ie", "im4gn", "d3en", // variants, storage, high memory
		"g4dn", "g4ad", "g5", "g5g", "g6", "g6e", "p4d", "p5", "inf1", "inf2", "trn1", "trn1n", "dl1"} { // accelerated
		if !families[f] {
			t.Errorf("family %s missing", f)
		}
	}
	m5 := byName["m5.large"]
	if m5.VCPU != 2 || m5.MemoryMiB != 8192 || m5.PodLimit() != 29 || m5.Architecture != "amd64" {
		t.Errorf("m5.large = %+v", m5)
	}
	if g := byName["c7g.2xlarge"]; g.Architecture != "arm64" || g.VCPU != 8 || g.MemoryMiB != 16384 {
		t.Errorf("c7g.2xlarge = %+v", g)
	}
	if tm := byName["t4g.medium"]; tm.VCPU != 2 || tm.MemoryMiB != 4096 || tm.PodLimit() != 17 {
		t.Errorf("t4g.medium = %+v", tm)
	}
	for name, want := range map[string]InstanceType{
		"g5.12xlarge":   {VCPU: 48, MemoryMiB: 192 << 10, GPUs: &Accelerators{Name: "A10G", Manufacturer: "NVIDIA", Count: 4, MemoryMiB: 22888}, EFA: 1, LocalNVMeGB: 3800},
		"p5.48xlarge":   {VCPU: 192, MemoryMiB: 2048 << 10, GPUs: &Accelerators{Name: "H100", Manufacturer: "NVIDIA", Count: 8, MemoryMiB: 81920}, EFA: 32, LocalNVMeGB: 30400},
		"inf2.24xlarge": {VCPU: 96, MemoryMiB: 384 << 10, Neuron: &Accelerators{Name: "Inferentia2", Manufacturer: "AWS", Count: 6, MemoryMiB: 32768, CoresPerDevice: 2}},
		"x2iedn.xlarge": {VCPU: 4, MemoryMiB: 128 << 10, LocalNVMeGB: 118},
		"is4gen.medium": {VCPU: 1, MemoryMiB: 6 << 10, LocalNVMeGB: 937},
	} {
		got := byName[name]
		if got.VCPU != want.VCPU || got.MemoryMiB != want.MemoryMiB || got.EFA != want.EFA || got.LocalNVMeGB != want.LocalNVMeGB ||
			(got.GPUs == nil) != (want.GPUs == nil) || (got.GPUs != nil && *got.GPUs != *want.GPUs) ||
			(got.Neuron == nil) != (want.Neuron == nil) || (got.Neuron != nil && *got.Neuron != *want.Neuron) {
			t.Errorf("%s = %+v (gpus %+v, neuron %+v), want %+v", name, got, got.GPUs, got.Neuron, want)
		}
	}
	for _, o := range m5.Offerings {
		if o.CapacityType == "on-demand" && o.Price != 0.096 {
			t.Errorf("m5.large on-demand price %v, want AWS's 0.096", o.Price)
		}
		if o.CapacityType == "spot" && (o.Price < 0.096*0.3-1e-9 || o.Price > 0.096*0.4+1e-9) {
			t.Errorf("m5.large spot price %v outside 30-40%% of on-demand", o.Price)
		}
	}
}

func TestReadRejectsBadCatalogsNamingTheField(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"unknown field":        {`{"region":"r","instanceTypes":[],"extra":1}`, "unknown field"},
		"no region":            {`{"instanceTypes":[{"name":"a.b"}]}`, "region"},
		"no types":             {`{"region":"r","instanceTypes":[]}`, "instanceTypes"},
		"bad arch":             {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"x86","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "architecture"},
		"no pod limit":         {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "maxPods"},
		"bad capacity":         {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"reserved","price":1}]}]}`, "capacityType"},
		"zero price":           {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":0}]}]}`, "price"},
		"bad overhead":         {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"overhead":{"cpu":"lots"},"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "overhead.cpu"},
		"duplicate names":      {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]},{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "duplicate"},
		"not json":             {`{`, "decoding"},
		"gpus without a count": {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"gpus":{"name":"T4","manufacturer":"NVIDIA"},"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "gpus.count"},
		"neuron without cores": {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"neuron":{"name":"Trainium","manufacturer":"AWS","count":1},"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "neuron.coresPerDevice"},
		"negative efa":         {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"efa":-1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, ".efa"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	f.Add(`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`)
	f.Add(`{"region":"r","instanceTypes":[{"name":"fake-it-0","architecture":"amd64","vcpu":1,"memoryMiB":2048,"maxPods":10,"overhead":{"cpu":"100m","memory":"10Mi","vmMemoryPercent":0},"offerings":[{"zone":"test-zone-1","capacityType":"spot","price":0.3}]}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Read(strings.NewReader(in))
		if err != nil {
			return
		}
		if c.Validate() != nil {
			t.Fatal("Read returned a catalog that does not validate")
		}
		for _, it := range c.InstanceTypes {
			if it.PodLimit() <= 0 {
				t.Fatalf("%s: pod limit %d", it.Name, it.PodLimit())
			}
		}
	})
}

func TestZonesAreEveryOfferedZoneOnceInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		file File
		want []string
	}{
		{name: "empty", file: File{}, want: []string{}},
		{name: "shared and repeated zones, unsorted", file: File{InstanceTypes: []InstanceType{
			{Name: "m5.large", Offerings: []Offering{{Zone: "us-east-1b"}, {Zone: "us-east-1a"}, {Zone: "us-east-1b", CapacityType: "spot"}}},
			{Name: "c5.large", Offerings: []Offering{{Zone: "us-east-1c"}, {Zone: "us-east-1a"}}},
		}}, want: []string{"us-east-1a", "us-east-1b", "us-east-1c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.file.Zones(); !slices.Equal(got, tc.want) {
				t.Errorf("Zones() = %v, want %v", got, tc.want)
			}
		})
	}
}
