/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// TestAFailedResolutionIsReusedUntilItsTTL: a node class whose SSM parameter does not exist fails to resolve; the
// launches, solves and status passes of the next failureTTL get that error without calling AWS, and its message
// is the same each time (no request ID), so a status that carries it is written once.
func TestAFailedResolutionIsReusedUntilItsTTL(t *testing.T) {
	f := newFixture(t, nil)
	nc := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "missing", UID: "uid-2", Generation: 1},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole",
			AMISelectorTerms:    []stevedorev1.AMISelectorTerm{{SSMParameter: "/no/such/parameter"}},
			SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}}}
	f.addNodeClass(t, nc)
	ctx := testCtx(t)
	_, first := f.provider.Resolve(ctx, nc)
	if first == nil {
		t.Fatal("a missing SSM parameter resolved")
	}
	calls := f.emu.Calls()["AmazonSSM.GetParameter"]
	for range 10 {
		f.clock.Step(failureTTL / 20)
		if _, err := f.provider.Resolve(ctx, nc); err == nil || err.Error() != first.Error() {
			t.Fatalf("within the failure TTL Resolve returned %v, want the cached %v", err, first)
		}
	}
	if got := f.emu.Calls()["AmazonSSM.GetParameter"]; got != calls {
		t.Errorf("GetParameter called %d more times within the failure TTL, want 0", got-calls)
	}
	f.clock.Step(failureTTL)
	_, again := f.provider.Resolve(ctx, nc)
	if again == nil || f.emu.Calls()["AmazonSSM.GetParameter"] == calls {
		t.Fatalf("after the failure TTL Resolve did not ask AWS again (err %v)", again)
	}
	if StableMessage(again) != StableMessage(first) {
		t.Errorf("the same failure gives two messages:\n%s\n%s", StableMessage(first), StableMessage(again))
	}
	if strings.Contains(StableMessage(first), "RequestID") || !strings.Contains(StableMessage(first), "ParameterNotFound") {
		t.Errorf("StableMessage = %q: want the error code and no request ID", StableMessage(first))
	}
	// a change of the spec is a new node class: resolved at once
	nc2 := nc.DeepCopy()
	nc2.Generation = 2
	nc2.Spec.AMISelectorTerms = nil
	before := f.emu.Calls()["EC2.DescribeSubnets"]
	if _, err := f.provider.Resolve(ctx, nc2); err != nil {
		t.Fatalf("the corrected node class: %v", err)
	}
	if f.emu.Calls()["EC2.DescribeSubnets"] == before {
		t.Error("a new generation of the node class was served from the failure cache")
	}
}

func TestStableMessageDropsRequestIDs(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "AMIs: operation error SSM: GetParameter, https response error StatusCode: 400, RequestID: 6f1c2a4e-94b4-4e6f-9d0e-2b7f1c9a0b11, ParameterNotFound: no such parameter",
			want: "AMIs: operation error SSM: GetParameter, https response error StatusCode: 400, ParameterNotFound: no such parameter"},
		{in: "subnets: operation error EC2: DescribeSubnets, https response error StatusCode: 503, RequestID: abc, api error Unavailable: try later",
			want: "subnets: operation error EC2: DescribeSubnets, https response error StatusCode: 503, api error Unavailable: try later"},
		{in: "no request here", want: "no request here"},
	}
	for _, tc := range tests {
		if got := StableMessage(stringError(tc.in)); got != tc.want {
			t.Errorf("StableMessage(%q) =\n%q, want\n%q", tc.in, got, tc.want)
		}
	}
}

type stringError string

func (e stringError) Error() string { return string(e) }
