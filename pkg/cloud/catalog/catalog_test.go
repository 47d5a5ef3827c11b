package catalog

import (
	"strings"
	"testing"
)

func TestDefaultCatalogCoversTheCuratedFamilies(t *testing.T) {
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
	for _, f := range []string{"t3", "t3a", "t4g", "m5", "c6a", "r6g", "m7i", "c7g", "m8g", "r8a"} {
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
		"unknown field":   {`{"region":"r","instanceTypes":[],"extra":1}`, "unknown field"},
		"no region":       {`{"instanceTypes":[{"name":"a.b"}]}`, "region"},
		"no types":        {`{"region":"r","instanceTypes":[]}`, "instanceTypes"},
		"bad arch":        {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"x86","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "architecture"},
		"no pod limit":    {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "maxPods"},
		"bad capacity":    {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"reserved","price":1}]}]}`, "capacityType"},
		"zero price":      {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":0}]}]}`, "price"},
		"bad overhead":    {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"overhead":{"cpu":"lots"},"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "overhead.cpu"},
		"duplicate names": {`{"region":"r","instanceTypes":[{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]},{"name":"a.b","architecture":"amd64","vcpu":1,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","price":1}]}]}`, "duplicate"},
		"not json":        {`{`, "decoding"},
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
