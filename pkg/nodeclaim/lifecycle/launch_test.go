/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// The fake cloud names its first instance after a counter.
const (
	firstInstance   = "i-00000000000000001"
	firstProviderID = "aws:///us-east-1a/" + firstInstance
	firstNodeName   = "ip-10-0-0-1.ec2.internal"
)

// launchClaim is NodeClaim c1 as the provisioner would write it for one m5.large, on-demand, in us-east-1a.
func launchClaim() *test.NodeClaimWrapper {
	return test.NodeClaim("c1", "default").Created(t0).
		Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large").
		Require(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a").
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand)
}

func TestLaunchRecordsInstance(t *testing.T) {
	claim := launchClaim().Obj()
	web := test.Pod("web").Req("cpu", "500m").Pending().Obj()
	big := test.Pod("big").Req("cpu", "3").Pending().Obj() // more than an m5.large holds
	h := newHarness(t, claim, web, big)
	h.prov.assign(web, big)

	after, err := h.life.launch(h.Ctx, claim)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if after != testRegistrationTimeout {
		t.Errorf("launch asks to look again after %v, want the registration timeout %v", after, testRegistrationTimeout)
	}
	got := h.claim()
	s := got.Status
	want := map[string][2]string{
		"instanceID":   {s.InstanceID, firstInstance},
		"providerID":   {s.ProviderID, firstProviderID},
		"nodeName":     {s.NodeName, firstNodeName},
		"instanceType": {s.InstanceType, "m5.large"},
		"zone":         {s.Zone, "us-east-1a"},
		"capacityType": {s.CapacityType, stevedorev1.CapacityTypeOnDemand},
		"price":        {s.Price, "0.0960"},
		"imageID":      {s.ImageID, "ami-fake"},
	}
	for field, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("status.%s = %q, want %q", field, gw[0], gw[1])
		}
	}
	it := h.Cloud.InstanceType("m5.large")
	if !apiequality.Semantic.DeepEqual(s.Capacity, it.Capacity) {
		t.Errorf("status.capacity = %v, want the type's %v", s.Capacity, it.Capacity)
	}
	if !apiequality.Semantic.DeepEqual(s.Allocatable, it.Allocatable()) {
		t.Errorf("status.allocatable = %v, want the type's %v", s.Allocatable, it.Allocatable())
	}
	c := condition(got, stevedorev1.ConditionLaunched)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Launched" ||
		c.Message != "instance "+firstInstance+" (m5.large in us-east-1a, on-demand)" {
		t.Errorf("Launched condition = %+v, want True/Launched naming the instance", c)
	}
	if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Create c1"}) {
		t.Errorf("cloud calls = %q", calls)
	}
	wantEvents := []string{"Normal Launched launched " + firstInstance + ": m5.large in us-east-1a, on-demand, $0.0960/h, node ip-10-0-0-1.ec2.internal, for 2 pods: default/big, default/web"}
	if diff := cmp.Diff(wantEvents, h.Events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// the pod the type cannot hold is provisioned again, then the rest are nominated to the new node
	if told, want := h.prov.heard(), []string{"replan big", "nominate c1 on " + firstNodeName}; !reflect.DeepEqual(told, want) {
		t.Errorf("provisioning told %q, want %q", told, want)
	}
	assigned := h.prov.AssignedPods("c1")
	if len(assigned) != 1 || assigned[0].Name != "web" {
		t.Errorf("pods still planned on c1 = %v, want [web]", podNames(assigned))
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// codedError is a cloud API error with a code, as the AWS SDK returns.
type codedError struct{ code, msg string }

func (e codedError) Error() string     { return e.code + ": " + e.msg }
func (e codedError) ErrorCode() string { return e.code }

func TestLaunchFailures(t *testing.T) {
	type want struct {
		err      func(error) bool // nil: no error
		deleted  bool
		launched metav1.ConditionStatus // "" when the condition is not set
		message  string                 // of the Launched condition
		event    string
		told     []string // what provisioning is told
	}
	configErr := &cloud.LaunchConfigurationError{Code: "UnauthorizedOperation", Message: "not allowed", Hint: "grant ec2:RunInstances"}
	notReady := &cloud.NodeClassNotReadyError{Name: "default", Reason: "no subnet"}
	timeout := errors.New("dial tcp 10.0.0.1:443: i/o timeout")
	throttled := codedError{code: "RequestLimitExceeded", msg: "slow down"}
	is := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }
	tests := []struct {
		name    string
		created time.Time
		setup   func(*fake.Provider)
		want    want
	}{
		{
			name:    "no capacity in any offering deletes the NodeClaim and forgets its offerings",
			created: t0,
			setup:   func(c *fake.Provider) { c.NoCapacity("m5.large", "us-east-1a", "on-demand") },
			want: want{deleted: true, told: []string{"offerings changed"},
				event: "Warning LaunchFailed no capacity: insufficient capacity in every offering tried (1): " +
					"[m5.large/us-east-1a/on-demand: InsufficientInstanceCapacity]"},
		},
		{
			name:    "launch configuration error sets Launched false and is retried",
			created: t0,
			setup:   func(c *fake.Provider) { c.FailNext(fake.CallCreate, configErr) },
			want: want{err: is(configErr), launched: metav1.ConditionFalse, message: configErr.Error(),
				event: "Warning LaunchFailed UnauthorizedOperation: not allowed (grant ec2:RunInstances)"},
		},
		{
			name:    "launch configuration error past the registration timeout deletes the NodeClaim",
			created: t0.Add(-testRegistrationTimeout - time.Second),
			setup:   func(c *fake.Provider) { c.FailNext(fake.CallCreate, configErr) },
			want: want{deleted: true,
				event: "Warning LaunchFailed UnauthorizedOperation: not allowed (grant ec2:RunInstances)"},
		},
		{
			name:    "node class not ready sets Launched false and is retried",
			created: t0,
			setup:   func(c *fake.Provider) { c.FailNext(fake.CallCreate, notReady) },
			want: want{err: is(notReady), launched: metav1.ConditionFalse, message: notReady.Error(),
				event: "Warning LaunchFailed EC2NodeClass default is not ready: no subnet"},
		},
		{
			name:    "an error without a code is retried with backoff",
			created: t0,
			setup:   func(c *fake.Provider) { c.FailNext(fake.CallCreate, timeout) },
			want: want{err: is(timeout),
				event: "Warning LaunchFailed launch failed (CloudError), retrying: " + timeout.Error()},
		},
		{
			name:    "throttling is retried with backoff and reported with its code",
			created: t0,
			setup:   func(c *fake.Provider) { c.FailNext(fake.CallCreate, throttled) },
			want: want{err: func(err error) bool { var c codedError; return errors.As(err, &c) },
				event: "Warning LaunchFailed launch failed (RequestLimitExceeded), retrying: RequestLimitExceeded: slow down"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := launchClaim().Created(tc.created).Obj()
			web := test.Pod("web").Req("cpu", "500m").Pending().Obj()
			h := newHarness(t, claim, web)
			h.prov.assign(web)
			tc.setup(h.Cloud)

			after, err := h.life.launch(h.Ctx, claim)
			switch {
			case tc.want.err == nil && err != nil:
				t.Fatalf("launch: %v", err)
			case tc.want.err != nil && (err == nil || !tc.want.err(err)):
				t.Fatalf("launch error = %v, want the cloud's error", err)
			}
			if after != 0 {
				t.Errorf("launch asks to look again after %v; a failed launch is requeued by its error or not at all", after)
			}
			got := h.claim()
			if deleted := got == nil || got.DeletionTimestamp != nil; deleted != tc.want.deleted {
				t.Errorf("NodeClaim deleted = %v, want %v", deleted, tc.want.deleted)
			}
			if got != nil && !tc.want.deleted {
				c := condition(got, stevedorev1.ConditionLaunched)
				switch {
				case tc.want.launched == "" && c != nil:
					t.Errorf("Launched condition = %+v, want none", c)
				case tc.want.launched != "" && (c == nil || c.Status != tc.want.launched || c.Reason != "LaunchFailed" || c.Message != tc.want.message):
					t.Errorf("Launched condition = %+v, want %s/LaunchFailed %q", c, tc.want.launched, tc.want.message)
				}
				if got.Status.InstanceID != "" {
					t.Errorf("status.instanceID = %q after a failed launch", got.Status.InstanceID)
				}
			}
			if ev := h.Events(); len(ev) != 1 || ev[0] != tc.want.event {
				t.Errorf("events = %q, want [%q]", ev, tc.want.event)
			}
			if told := h.prov.heard(); !reflect.DeepEqual(told, tc.want.told) {
				t.Errorf("provisioning told %q, want %q", told, tc.want.told)
			}
			if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Create c1"}) {
				t.Errorf("cloud calls = %q, want one Create and no Delete", calls)
			}
		})
	}
}

func TestLaunchNoCapacityMarksOfferingsUnavailable(t *testing.T) {
	claim := launchClaim().Obj()
	h := newHarness(t, claim)
	h.Cloud.NoCapacity("m5.large", "us-east-1a", "on-demand")
	if _, err := h.life.launch(h.Ctx, claim); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"m5.large/us-east-1a/on-demand": "InsufficientInstanceCapacity"}
	if got := h.Cloud.Unavailable(); !reflect.DeepEqual(got, want) {
		t.Errorf("unavailable offerings = %v, want %v", got, want)
	}
	// the next solve reads the offerings again
	if told := h.prov.heard(); !slices.Contains(told, "offerings changed") {
		t.Errorf("provisioning told %q, want the offerings changed", told)
	}
}

func TestLaunchRetriedAfterTransientError(t *testing.T) {
	claim := launchClaim().Obj()
	h := newHarness(t, claim)
	h.Cloud.FailNext(fake.CallCreate, codedError{code: "InternalError", msg: "try again"})

	if _, err := h.life.launch(h.Ctx, claim); err == nil || !strings.HasPrefix(err.Error(), "launching: ") {
		t.Fatalf("first launch error = %v, want the wrapped cloud error", err)
	}
	if c := h.claim(); c == nil || c.Status.InstanceID != "" {
		t.Fatalf("NodeClaim after a transient failure = %+v, want it kept without an instance", c)
	}
	after, err := h.life.launch(h.Ctx, claim)
	if err != nil || after != testRegistrationTimeout {
		t.Fatalf("second launch = %v, %v; want it to launch", after, err)
	}
	if got := h.claim().Status.InstanceID; got != firstInstance {
		t.Errorf("status.instanceID = %q, want %q", got, firstInstance)
	}
	if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Create c1", "Create c1"}) {
		t.Errorf("cloud calls = %q, want two creates", calls)
	}
}

func TestCloudErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{codedError{code: "InsufficientInstanceCapacity"}, "InsufficientInstanceCapacity"},
		{errors.Join(errors.New("wrapped"), codedError{code: "Unavailable"}), "Unavailable"},
		{codedError{code: ""}, "CloudError"},
		{errors.New("connection refused"), "CloudError"},
	}
	for _, tc := range tests {
		if got := cloudErrorCode(tc.err); got != tc.want {
			t.Errorf("cloudErrorCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
