/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

const testCluster = "test"

type fixture struct {
	emu      *awsemu.Emulator
	provider *Provider
	clock    *clocktesting.FakeClock
	classes  cache.Indexer
	// apiServer is the Kubernetes version the provider reads (an error while it says one)
	apiServer *fakeAPIServer
}

// fakeAPIServer answers the provider's reads of the Kubernetes version.
type fakeAPIServer struct {
	mu      sync.Mutex
	version string
	err     error
}

func (a *fakeAPIServer) read(context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version, a.err
}

func (a *fakeAPIServer) set(version string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.version, a.err = version, err
}

func newFixture(t *testing.T, configure func(*Options)) *fixture {
	t.Helper()
	return newFixtureIn(t, "us-east-1", configure)
}

// newFixtureIn is newFixture with the emulator and the provider in a region, the emulator seeded with the region's
// embedded catalog.
func newFixtureIn(t *testing.T, region string, configure func(*Options)) *fixture {
	t.Helper()
	cat, err := catalog.ForRegion(region)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := awsemu.Start(awsemu.Options{ClusterName: testCluster, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	emu.IAM.AddRole("NodeRole")
	clk := clocktesting.NewFakeClock(time.Now())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	env := map[string]string{"AWS_ENDPOINT_URL": emu.URL(), "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_EC2_METADATA_DISABLED": "true"}
	apiServer := &fakeAPIServer{version: "1.37"}
	opts := Options{
		ClusterName: testCluster, ClusterEndpoint: "https://api.example", CABundle: []byte("-----BEGIN CERTIFICATE-----\n"),
		ServiceCIDR: "10.100.0.0/16", Region: region, KubernetesVersion: apiServer.read,
		Env: func(k string) string { return env[k] }, NodeClasses: listers.NewEC2NodeClassLister(indexer),
		VMMemoryOverheadPercent: 7.5, Clock: clk,
		// a catalog read that fails under a loaded test run falls back to the embedded catalog (the emulator's
		// region), so that a test of launches does not depend on it; TestACatalogThatCannotBeReadIsNeverGuessed
		// sets this itself
		EmbeddedCatalog: true,
	}
	if configure != nil {
		configure(&opts)
	}
	p, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{emu: emu, provider: p, clock: clk, classes: indexer, apiServer: apiServer}
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1"},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			Tags:                       map[string]string{"team": "platform"}}})
	return f
}

// addNodeClass adds a node class as the status controller keeps it: one naming a role has the finalizer that lets
// its instance profile be created.
func (f *fixture) addNodeClass(t *testing.T, nc *stevedorev1.EC2NodeClass) {
	t.Helper()
	if nc.Spec.Role != "" && !stevedorev1.HasTerminationFinalizer(nc.Finalizers) {
		nc.Finalizers = append(nc.Finalizers, stevedorev1.TerminationFinalizer)
	}
	if err := f.classes.Add(nc); err != nil {
		t.Fatal(err)
	}
}

// claim is a NodeClaim of NodePool default (EC2NodeClass default) with the requirements given.
func claim(name string, reqs ...stevedorev1.NodeSelectorRequirementWithMinValues) *stevedorev1.NodeClaim {
	c := test.NodeClaim(name, "default").Labels("team", "a").Obj()
	c.Spec.Requirements = reqs
	return c
}

func in(key string, values ...string) stevedorev1.NodeSelectorRequirementWithMinValues {
	return stevedorev1.NodeSelectorRequirementWithMinValues{Key: key, Operator: "In", Values: values}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateLaunchesTheCheapestOfferingAndTagsTheInstance(t *testing.T) {
	f := newFixture(t, nil)
	inst, err := f.provider.Create(testCtx(t), claim("nc-1", in(corev1.LabelInstanceTypeStable, "m5.xlarge", "m5.large"),
		in(stevedorev1.LabelCapacityType, "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Type != "m5.large" || inst.CapacityType != "on-demand" || inst.Price != 0.096 {
		t.Fatalf("launched %+v, want the cheaper m5.large on-demand at 0.096", inst)
	}
	if !strings.HasSuffix(inst.NodeName, ".ec2.internal") || inst.ProviderID != "aws:///"+inst.Zone+"/"+inst.ID {
		t.Errorf("node name %q, provider id %q", inst.NodeName, inst.ProviderID)
	}
	got := f.emu.EC2.Instance(inst.ID)
	for k, v := range map[string]string{OwnershipTag(testCluster): "owned", TagNodePool: "default", TagNodeClaim: "nc-1",
		TagEKSClusterName: testCluster, "team": "platform"} {
		if got.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, got.Tags[k], v)
		}
	}
	lt := got.LaunchTemplate
	if lt.HTTPTokens != "required" || lt.HTTPPutResponseHopLimit != 1 {
		t.Errorf("IMDS %s hop %d, want IMDSv2 required with hop limit 1", lt.HTTPTokens, lt.HTTPPutResponseHopLimit)
	}
	if len(lt.BlockDevices) != 1 || lt.BlockDevices[0].VolumeSize != 20 || lt.BlockDevices[0].VolumeType != "gp3" || !lt.BlockDevices[0].Encrypted {
		t.Errorf("block devices %+v, want one encrypted gp3 20GiB root volume", lt.BlockDevices)
	}
	for _, kind := range []string{"volume", "network-interface"} {
		if lt.Tags[kind][OwnershipTag(testCluster)] != "owned" {
			t.Errorf("the launch template does not tag each %s with the ownership tag: %v", kind, lt.Tags)
		}
	}
	fleet := f.emu.EC2.LastRequest("CreateFleet")
	if fleet.Get("OnDemandOptions.AllocationStrategy") != "lowest-price" || fleet.Get("Type") != "instant" {
		t.Errorf("fleet request %v, want an instant fleet with lowest-price on-demand", fleet)
	}
}

func TestSpotUsesPriceCapacityOptimizedAndOverridesAreCheapestFirstAndCapped(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxInstanceTypes = 2 })
	_, err := f.provider.Create(testCtx(t), claim("nc-spot", in(corev1.LabelInstanceTypeStable, "m5.large", "m5.xlarge", "m5.2xlarge")))
	if err != nil {
		t.Fatal(err)
	}
	fleet := f.emu.EC2.LastRequest("CreateFleet")
	if fleet.Get("SpotOptions.AllocationStrategy") != "price-capacity-optimized" ||
		fleet.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot" {
		t.Fatalf("fleet %v, want spot with price-capacity-optimized", fleet)
	}
	types := map[string]bool{}
	last := 0.0
	for i := 1; ; i++ {
		it := fleet.Get("LaunchTemplateConfigs.1.Overrides." + itoa(i) + ".InstanceType")
		if it == "" {
			break
		}
		types[it] = true
		price := f.provider.price(it, fleet.Get("LaunchTemplateConfigs.1.Overrides."+itoa(i)+".AvailabilityZone"), "spot")
		if price < last {
			t.Errorf("override %d (%s at %v) is cheaper than the one before it (%v): overrides must be cheapest first", i, it, price, last)
		}
		last = price
	}
	if len(types) != 2 || types["m5.2xlarge"] {
		t.Fatalf("override types %v, want the first two the NodeClaim lists (capped at 2)", types)
	}
}

func TestCreateFallsBackPastExhaustedPoolsAndCachesThem(t *testing.T) {
	f := newFixture(t, nil)
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		f.emu.EC2.SetCapacity("m5.large", z, "on-demand", 0)
	}
	c := claim("nc-ice", in(corev1.LabelInstanceTypeStable, "m5.large", "m5.xlarge"), in(stevedorev1.LabelCapacityType, "on-demand"))
	inst, err := f.provider.Create(testCtx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Type != "m5.xlarge" {
		t.Fatalf("launched %s, want m5.xlarge after m5.large ran out", inst.Type)
	}
	if !f.provider.UnavailableOfferings().IsUnavailable("m5.large", "us-east-1a", "on-demand") {
		t.Fatal("the exhausted offering must be in the unavailable-offerings cache")
	}
	only := claim("nc-ice-2", in(corev1.LabelInstanceTypeStable, "m5.large"), in(stevedorev1.LabelCapacityType, "on-demand"))
	_, err = f.provider.Create(testCtx(t), only)
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("error %v, want InsufficientCapacityError while every offering is cached unavailable", err)
	}
	f.clock.Step(cloud.UnavailableTTL + time.Second)
	if f.provider.UnavailableOfferings().IsUnavailable("m5.large", "us-east-1a", "on-demand") {
		t.Fatal("the cache entry must expire after its TTL")
	}
}

func TestLaunchTemplatesAreReusedAndCreateAdoptsAnInstanceAlreadyLaunchedForTheClaim(t *testing.T) {
	f := newFixture(t, nil)
	first, err := f.provider.Create(testCtx(t), claim("nc-a", in(corev1.LabelInstanceTypeStable, "c6g.large")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.provider.Create(testCtx(t), claim("nc-b", in(corev1.LabelInstanceTypeStable, "c6g.large"))); err != nil {
		t.Fatal(err)
	}
	if n := f.emu.EC2.Calls()["CreateLaunchTemplate"]; n != 1 {
		t.Fatalf("%d CreateLaunchTemplate calls, want 1 reused template", n)
	}
	again, err := f.provider.Create(testCtx(t), claim("nc-a", in(corev1.LabelInstanceTypeStable, "c6g.large")))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || len(f.emu.EC2.Instances()) != 2 {
		t.Fatalf("relaunching nc-a gave %s (first %s), %d instances; want the first adopted", again.ID, first.ID, len(f.emu.EC2.Instances()))
	}
}

func TestConcurrentIdenticalLaunchesShareOneFleetCall(t *testing.T) {
	// A window far longer than the launches take to reach the batcher, so the test does not depend on timing.
	f := newFixture(t, func(o *Options) { o.FleetBatchWindow = 2 * time.Second })
	// one launch first, so the launch template exists and the concurrent ones reach the batcher together
	if _, err := f.provider.Create(testCtx(t), claim("warm", in(corev1.LabelInstanceTypeStable, "m6i.large"))); err != nil {
		t.Fatal(err)
	}
	before := f.emu.EC2.Calls()["CreateFleet"]
	const n = 5
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			_, err := f.provider.Create(context.Background(), claim("batch-"+itoa(i), in(corev1.LabelInstanceTypeStable, "m6i.large")))
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls := f.emu.EC2.Calls()["CreateFleet"] - before; calls >= n {
		t.Fatalf("%d CreateFleet calls for %d identical launches, want them batched", calls, n)
	}
	if len(f.emu.EC2.Instances()) != n+1 {
		t.Fatalf("%d instances, want %d", len(f.emu.EC2.Instances()), n+1)
	}
}

func TestDeleteRefusesInstancesWithoutTheOwnershipTagAndListFiltersByTag(t *testing.T) {
	f := newFixture(t, nil)
	foreign := f.emu.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{"Name": "someone-else"})
	other := f.emu.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{OwnershipTag("other-cluster"): "owned", TagNodePool: "x"})
	ours, err := f.provider.Create(testCtx(t), claim("nc-ours", in(corev1.LabelInstanceTypeStable, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{foreign.ID, other.ID} {
		if err := f.provider.Delete(testCtx(t), id); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("deleting %s: %v, want a refusal", id, err)
		}
	}
	listed, err := f.provider.List(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != ours.ID {
		t.Fatalf("List = %v, want only %s", listed, ours.ID)
	}
	if err := f.provider.Delete(testCtx(t), ours.ID); err != nil {
		t.Fatal(err)
	}
	if st := f.emu.EC2.Instance(ours.ID).State; st != "shutting-down" && st != "terminated" {
		t.Fatalf("our instance is %s after Delete", st)
	}
	if st := f.emu.EC2.Instance(foreign.ID).State; st != "running" {
		t.Fatalf("the foreign instance is %s, want untouched", st)
	}
	if err := f.provider.Delete(testCtx(t), "i-0000000000000gone"); err != nil {
		t.Fatalf("deleting a vanished instance: %v, want nil", err)
	}
}

// addSmallPodsNodeClass adds EC2NodeClass small-pods: one subnet (us-east-1a) and kubelet maxPods 20.
func (f *fixture) addSmallPodsNodeClass(t *testing.T) {
	t.Helper()
	maxPods := int32(20)
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "small-pods", UID: "uid-2"},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{ID: "subnet-0a000000000001"}},
			Kubelet: &stevedorev1.KubeletConfiguration{MaxPods: &maxPods}}})
}

func TestInstanceTypesComeFromTheAPIsWithAllocatableFromTheNodeClass(t *testing.T) {
	f := newFixture(t, nil)
	f.addSmallPodsNodeClass(t)
	its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("small").NodeClass("small-pods").Obj())
	if err != nil {
		t.Fatal(err)
	}
	if len(its) < 200 {
		t.Fatalf("%d instance types, want the emulated region's catalog", len(its))
	}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.Zone != "us-east-1a" {
				t.Fatalf("%s offered in %s, want only the selected subnet's zone", it.Name, o.Zone)
			}
		}
		if pods := it.Allocatable()[corev1.ResourcePods]; pods.Value() != 20 {
			t.Fatalf("%s pods %d, want the node class's maxPods 20", it.Name, pods.Value())
		}
	}
	if f.emu.EC2.Calls()["DescribeInstanceTypes"] == 0 {
		t.Error("the catalog must come from DescribeInstanceTypes when EC2 answers")
	}
}

// TestACatalogThatCannotBeReadIsNeverGuessed: when the EC2 and pricing APIs cannot be read, the embedded catalog
// is used only when configured and only in its own region; otherwise nothing is offered and the error is kept. A
// catalog read before is kept through a failed refresh, and the read is tried again a minute later.
func TestACatalogThatCannotBeReadIsNeverGuessed(t *testing.T) {
	tests := []struct {
		name        string
		region      string
		useFallback bool
		wantTypes   bool
		wantSource  string
	}{
		{name: "not configured", region: "us-east-1", wantSource: "none: "},
		{name: "configured, in the embedded catalog's region", region: "us-east-1", useFallback: true, wantTypes: true},
		{name: "configured, in another region: that region's embedded catalog", region: "eu-west-1", useFallback: true, wantTypes: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.Region, o.EmbeddedCatalog = tc.region, tc.useFallback })
			f.emu.InjectFault(awsemu.Fault{Action: "DescribeInstanceTypes", Code: "UnauthorizedOperation", Status: 403, Times: -1})
			cat := f.provider.Catalog(testCtx(t))
			if got := len(cat.InstanceTypes) > 0; got != tc.wantTypes || !strings.HasPrefix(cat.Source, tc.wantSource) || cat.Source == "EC2 and pricing APIs" {
				t.Fatalf("catalog source %q with %d types", cat.Source, len(cat.InstanceTypes))
			}
			if tc.wantTypes && cat.Region != tc.region {
				t.Errorf("a catalog of region %s used in %s", cat.Region, tc.region)
			}
			if err := f.provider.CatalogError(); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
				t.Errorf("CatalogError = %v, want the UnauthorizedOperation", err)
			}
		})
	}
	t.Run("a failed refresh keeps the catalog read before, and the read is retried", func(t *testing.T) {
		f := newFixture(t, nil)
		first := f.provider.Catalog(testCtx(t))
		if first.Source != "EC2 and pricing APIs" {
			t.Fatalf("first catalog from %q", first.Source)
		}
		f.emu.InjectFault(awsemu.Fault{Action: "DescribeSpotPriceHistory", Code: "RequestLimitExceeded", Status: 503, Times: -1})
		f.clock.Step(CatalogRefreshInterval)
		if got := f.provider.Catalog(testCtx(t)); got != first || f.provider.CatalogError() == nil {
			t.Fatalf("after a failed refresh the catalog is %q (error %v), want the one read before and the error", got.Source, f.provider.CatalogError())
		}
		calls := f.emu.Calls()["EC2.DescribeInstanceTypes"]
		f.clock.Step(CatalogRetryInterval / 2)
		f.provider.Catalog(testCtx(t))
		if f.emu.Calls()["EC2.DescribeInstanceTypes"] != calls {
			t.Error("the catalog was read again before the retry interval")
		}
		f.emu.ClearFaults()
		f.clock.Step(CatalogRetryInterval)
		if got := f.provider.Catalog(testCtx(t)); got == first || got.Source != "EC2 and pricing APIs" || f.provider.CatalogError() != nil {
			t.Errorf("a minute after the failure the catalog was not read again (%q, error %v)", got.Source, f.provider.CatalogError())
		}
	})
}

// TestAFirstCatalogReadThatFailsIsRetriedWithinSeconds: with no catalog read from AWS yet nothing can be launched,
// so a failed read is tried again after CatalogFirstRetry, then twice as long each time it fails again (up to
// CatalogRetryInterval), and not before; WatchCatalog makes the reads when they are due and says when one succeeds.
func TestAFirstCatalogReadThatFailsIsRetriedWithinSeconds(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.EmbeddedCatalog = false })
	f.emu.InjectFault(awsemu.Fault{Action: "DescribeInstanceTypeOfferings", Code: "RequestLimitExceeded", Status: 503, Times: -1})
	if cat := f.provider.Catalog(testCtx(t)); len(cat.InstanceTypes) > 0 {
		t.Fatalf("a catalog of %d types from %q while its reads fail", len(cat.InstanceTypes), cat.Source)
	}
	reads := func() int { return f.emu.Calls()["EC2.DescribeInstanceTypes"] }
	for _, wait := range []time.Duration{CatalogFirstRetry, 2 * CatalogFirstRetry, 4 * CatalogFirstRetry} {
		before := reads()
		f.clock.Step(wait - time.Millisecond)
		f.provider.Catalog(testCtx(t))
		if reads() != before {
			t.Fatalf("read again before %s", wait)
		}
		f.clock.Step(time.Millisecond)
		f.provider.Catalog(testCtx(t))
		if reads() == before {
			t.Fatalf("not read again %s after the failure", wait)
		}
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	recovered := make(chan struct{}, 1)
	go f.provider.WatchCatalog(ctx, func(context.Context) { recovered <- struct{}{} })
	f.emu.ClearFaults()
	f.clock.Step(8 * CatalogFirstRetry)
	select {
	case <-recovered:
	case <-time.After(30 * time.Second):
		t.Fatal("WatchCatalog did not read the catalog when its retry was due")
	}
	if cat := f.provider.Catalog(testCtx(t)); cat.Source != "EC2 and pricing APIs" || f.provider.CatalogError() != nil {
		t.Errorf("after the recovery the catalog is from %q (error %v)", cat.Source, f.provider.CatalogError())
	}
}

// TestAResponseCutMidBodyIsRetried: a response lost on the way (its body cut and the connection closed) is asked
// again, as the SDK's retryer does not on its own ("failed to decode response body, unexpected EOF"): the catalog
// is read at the first try, and a launch whose CreateFleet answer was cut launches one instance.
func TestAResponseCutMidBodyIsRetried(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.EmbeddedCatalog = false })
	for _, action := range []string{"DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "AWSPriceListService.GetProducts", "CreateFleet"} {
		f.emu.InjectFault(awsemu.Fault{Action: action, Truncate: true, Times: 1})
	}
	if cat := f.provider.Catalog(testCtx(t)); cat.Source != "EC2 and pricing APIs" || f.provider.CatalogError() != nil {
		t.Fatalf("catalog from %q (error %v), want it read from the APIs despite the cut responses", cat.Source, f.provider.CatalogError())
	}
	if _, err := f.provider.Create(testCtx(t), claim("nc-cut", in(corev1.LabelInstanceTypeStable, "m5.large"))); err != nil {
		t.Fatalf("a launch whose answer was cut: %v", err)
	}
	if n := len(f.emu.EC2.Instances()); n != 1 {
		t.Errorf("%d instances after a CreateFleet answer was cut and retried, want 1", n)
	}
}

func TestIsDriftedWhenTheAMIChanges(t *testing.T) {
	f := newFixture(t, nil)
	c := claim("nc-drift", in(corev1.LabelInstanceTypeStable, "m5.large"))
	inst, err := f.provider.Create(testCtx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	c.Status.ImageID = inst.ImageID
	if why, err := f.provider.IsDrifted(testCtx(t), c); err != nil || why != "" {
		t.Fatalf("IsDrifted = %q, %v before any change", why, err)
	}
	custom := f.emu.AddImage("golden-v2", "amd64", map[string]string{"golden": "true"})
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1", Generation: 2},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", AMISelectorTerms: []stevedorev1.AMISelectorTerm{{ID: custom}},
			SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}}})
	_ = f.classes.Update(&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-1", Generation: 2},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", AMISelectorTerms: []stevedorev1.AMISelectorTerm{{ID: custom}},
			SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}}})
	if why, err := f.provider.IsDrifted(testCtx(t), c); err != nil || why != "AMIDrift" {
		t.Fatalf("IsDrifted = %q, %v after the AMI changed, want AMIDrift", why, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestTransientEC2FaultsAreRetriedWithoutASecondInstance launches through faults AWS answers with: throttling, a
// 5xx, and an attempt that hangs past the request timeout. The SDK retries each with backoff; the retried
// CreateFleet carries the same ClientToken, so one instance is launched whatever the attempts.
func TestTransientEC2FaultsAreRetriedWithoutASecondInstance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault awsemu.Fault
	}{
		{"throttled", awsemu.Fault{Action: "CreateFleet", Code: "RequestLimitExceeded", Status: 503, Times: 2}},
		{"internal error", awsemu.Fault{Action: "CreateFleet", Code: "InternalError", Status: 500, Times: 2}},
		{"unavailable", awsemu.Fault{Action: "CreateFleet", Code: "Unavailable", Status: 503, Times: 2}},
		{"an attempt hangs", awsemu.Fault{Action: "CreateFleet", Delay: time.Minute, Times: 1}},
		{"describe throttled", awsemu.Fault{Action: "DescribeInstances", Code: "RequestLimitExceeded", Status: 503, Times: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.RequestTimeout = 500 * time.Millisecond })
			// the fault answers the first attempts; Create succeeding means the SDK retried past them
			f.emu.InjectFault(tc.fault)
			inst, err := f.provider.Create(testCtx(t), claim("nc-retry", in(corev1.LabelInstanceTypeStable, "m5.large")))
			if err != nil {
				t.Fatalf("Create through a transient %s: %v", tc.fault.Code+" fault", err)
			}
			var live []string
			for _, i := range f.emu.EC2.Instances() {
				live = append(live, i.ID)
			}
			if len(live) != 1 || live[0] != inst.ID {
				t.Fatalf("instances %v, want exactly the one Create returned (%s)", live, inst.ID)
			}
		})
	}
}

// TestAPersistentFaultIsReturnedWithItsCode: when the SDK's attempts are used up, Create returns the error with
// AWS's code for the caller's event and metric, and launches nothing.
func TestAPersistentFaultIsReturnedWithItsCode(t *testing.T) {
	f := newFixture(t, nil)
	f.emu.InjectFault(awsemu.Fault{Action: "CreateFleet", Code: "RequestLimitExceeded", Status: 503, Times: -1})
	_, err := f.provider.Create(testCtx(t), claim("nc-throttled", in(corev1.LabelInstanceTypeStable, "m5.large")))
	var coded interface{ ErrorCode() string }
	if err == nil || !errors.As(err, &coded) || coded.ErrorCode() != "RequestLimitExceeded" {
		t.Fatalf("Create under persistent throttling = %v, want an error carrying RequestLimitExceeded", err)
	}
	if n := len(f.emu.EC2.Instances()); n != 0 {
		t.Fatalf("%d instances launched, want none", n)
	}
}

func TestInstanceTypesAreBuiltOnceAndCarryEachCallsAvailability(t *testing.T) {
	f := newFixture(t, nil)
	f.addSmallPodsNodeClass(t)
	get := func(class string) map[string]*cloud.InstanceType {
		its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("p").NodeClass(class).Obj())
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*cloud.InstanceType{}
		for _, it := range its {
			byName[it.Name] = it
		}
		return byName
	}
	available := func(it *cloud.InstanceType, zone, ct string) bool {
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				return o.Available
			}
		}
		t.Fatalf("%s has no offering %s/%s", it.Name, zone, ct)
		return false
	}
	before := get("small-pods")
	f.provider.UnavailableOfferings().Mark("m5.large", "us-east-1a", "spot")
	after := get("small-pods")
	if before["m5.large"] == after["m5.large"] {
		t.Fatal("two calls returned the same InstanceType: a caller's availability would leak into the other's")
	}
	if !available(before["m5.large"], "us-east-1a", "spot") || available(after["m5.large"], "us-east-1a", "spot") {
		t.Error("the offering must be available in the types returned before it was marked, and unavailable after")
	}
	if pods := after["m5.large"].Allocatable()[corev1.ResourcePods]; pods.Value() != 20 {
		t.Errorf("pods %d, want the node class's maxPods 20", pods.Value())
	}
	// another node class (another kubelet configuration) gets its own types
	if pods := get("default")["m5.large"].Allocatable()[corev1.ResourcePods]; pods.Value() == 20 {
		t.Error("the default node class got the types built for the one with maxPods 20")
	}
	f.clock.Step(cloud.UnavailableTTL + time.Second)
	if !available(get("small-pods")["m5.large"], "us-east-1a", "spot") {
		t.Error("the offering must be available again once its cache entry expired")
	}
}

// TestAClaimOrderedByOverlaidPricesLaunchesInItsOrder: a NodeClaim whose prices NodeOverlays changed (annotated
// launch-order listed) gets a prioritized fleet that follows its order of types; any other keeps the lowest-price
// strategy, whatever its order.
func TestAClaimOrderedByOverlaidPricesLaunchesInItsOrder(t *testing.T) {
	for _, tc := range []struct {
		order        []string
		listed       bool
		wantType     string
		wantStrategy string
	}{
		{[]string{"m5.large", "c5.large"}, false, "c5.large", "lowest-price"},
		{[]string{"m5.large", "c5.large"}, true, "m5.large", "prioritized"},
		{[]string{"c5.large", "m5.large"}, true, "c5.large", "prioritized"},
	} {
		f := newFixture(t, nil)
		c := claim("nc-1", in(corev1.LabelInstanceTypeStable, tc.order...), in(stevedorev1.LabelCapacityType, "on-demand"))
		if tc.listed {
			c.Annotations = map[string]string{stevedorev1.AnnotationLaunchOrder: stevedorev1.LaunchOrderListed}
		}
		inst, err := f.provider.Create(testCtx(t), c)
		if err != nil {
			t.Fatal(err)
		}
		req := f.emu.EC2.LastRequest("CreateFleet")
		if inst.Type != tc.wantType || req.Get("OnDemandOptions.AllocationStrategy") != tc.wantStrategy {
			t.Errorf("order %v: launched %s with strategy %q, want %s with %s", tc.order, inst.Type, req.Get("OnDemandOptions.AllocationStrategy"), tc.wantType, tc.wantStrategy)
		}
	}
}

// TestALaunchGroupLaunchesAllOrNothing: the NodeClaims of one launch group (a gang's nodes of one shape) share one
// CreateFleet that launches all of them, of one type in one zone, or none.
func TestALaunchGroupLaunchesAllOrNothing(t *testing.T) {
	type room struct {
		zone, capacityType string
		instances          int
	}
	for _, tc := range []struct {
		name         string
		capacityType string
		zones        []string
		room         []room
		wantZone     string // "" when nothing may launch
	}{
		{name: "room for all four", capacityType: "on-demand", zones: []string{"us-east-1a"},
			room: []room{{"us-east-1a", "on-demand", 4}}, wantZone: "us-east-1a"},
		{name: "room for three of four: none launches", capacityType: "on-demand", zones: []string{"us-east-1a"},
			room: []room{{"us-east-1a", "on-demand", 3}}},
		{name: "three in one zone, four in another: all four in the other", capacityType: "on-demand", zones: []string{"us-east-1a", "us-east-1b"},
			room: []room{{"us-east-1a", "on-demand", 3}, {"us-east-1b", "on-demand", 4}}, wantZone: "us-east-1b"},
		{name: "two and two in two zones: none, a gang is not split across zones", capacityType: "on-demand", zones: []string{"us-east-1a", "us-east-1b"},
			room: []room{{"us-east-1a", "on-demand", 2}, {"us-east-1b", "on-demand", 2}}},
		{name: "spot, room for three of four: none launches", capacityType: "spot", zones: []string{"us-east-1a"},
			room: []room{{"us-east-1a", "spot", 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			for _, r := range tc.room {
				f.emu.EC2.SetCapacity("m5.xlarge", r.zone, r.capacityType, r.instances)
			}
			const n = 4
			type outcome struct {
				inst *cloud.Instance
				err  error
			}
			done := make(chan outcome, n)
			for i := 0; i < n; i++ {
				c := claim("gang-"+itoa(i), in(corev1.LabelInstanceTypeStable, "m5.xlarge"), in(stevedorev1.LabelCapacityType, tc.capacityType),
					in(corev1.LabelTopologyZone, tc.zones...))
				c.Annotations = map[string]string{stevedorev1.AnnotationLaunchGroup: stevedorev1.FormatLaunchGroup("g1", n)}
				go func() {
					inst, err := f.provider.Create(testCtx(t), c)
					done <- outcome{inst, err}
				}()
			}
			zones := map[string]bool{}
			launched := 0
			for i := 0; i < n; i++ {
				o := <-done
				if tc.wantZone == "" {
					var ice *cloud.InsufficientCapacityError
					if !errors.As(o.err, &ice) {
						t.Errorf("launch gave %v, %v; want InsufficientCapacityError", o.inst, o.err)
					}
					continue
				}
				if o.err != nil {
					t.Fatal(o.err)
				}
				launched++
				zones[o.inst.Zone] = true
			}
			if calls := f.emu.EC2.Calls()["CreateFleet"]; calls != 1 {
				t.Errorf("%d CreateFleet calls, want the group's one", calls)
			}
			if live := len(f.emu.EC2.Instances()); tc.wantZone == "" && live != 0 || tc.wantZone != "" && live != n {
				t.Errorf("%d instances launched, want %d", live, map[bool]int{true: 0, false: n}[tc.wantZone == ""])
			}
			if tc.wantZone != "" && (len(zones) != 1 || !zones[tc.wantZone]) {
				t.Errorf("the group launched in zones %v, want all in %s", zones, tc.wantZone)
			}
		})
	}
}

// TestConcurrentFirstLaunchesOfANodeClassAllSucceed: launches that arrive together before the node class's instance
// profile exists create it once and all launch (IAM refuses a second create and a second role).
func TestConcurrentFirstLaunchesOfANodeClassAllSucceed(t *testing.T) {
	f := newFixture(t, nil)
	const n = 6
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		c := claim("first-"+itoa(i), in(corev1.LabelInstanceTypeStable, "m5.large"))
		go func() {
			_, err := f.provider.Create(testCtx(t), c)
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if profiles := f.emu.IAM.InstanceProfiles(); len(profiles) != 1 {
		t.Errorf("%d instance profiles, want the node class's one", len(profiles))
	}
}
