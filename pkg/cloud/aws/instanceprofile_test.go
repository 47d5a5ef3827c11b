/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func profileClass(name, role string, profile *string, finalizer bool) *stevedorev1.EC2NodeClass {
	nc := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: stevedorev1.EC2NodeClassSpec{Role: role, InstanceProfile: profile}}
	if finalizer {
		nc.Finalizers = []string{stevedorev1.TerminationFinalizer}
	}
	return nc
}

func TestManagedInstanceProfileNames(t *testing.T) {
	a := ManagedInstanceProfileName("prod", "us-east-1", "default")
	for _, other := range []string{
		ManagedInstanceProfileName("prod", "eu-west-1", "default"),
		ManagedInstanceProfileName("staging", "us-east-1", "default"),
		ManagedInstanceProfileName("prod", "us-east-1", "gpu"),
	} {
		if other == a {
			t.Errorf("two node classes share the instance profile %s", a)
		}
	}
	if a != ManagedInstanceProfileName("prod", "us-east-1", "default") || !strings.HasPrefix(a, "prod_") {
		t.Errorf("name %s is not stable or does not start with the cluster's name", a)
	}
	long := ManagedInstanceProfileName(strings.Repeat("c", 100), "us-east-1", strings.Repeat("n", 253))
	if len(long) > 128 {
		t.Errorf("name of %d characters; IAM allows 128", len(long))
	}
}

// TestARoleGetsAnInstanceProfileStevedoreCreatesReusesAndDeletes drives the managed instance profile through its
// life against the emulated IAM, counting the calls of each step.
func TestARoleGetsAnInstanceProfileStevedoreCreatesReusesAndDeletes(t *testing.T) {
	f := newFixture(t, nil)
	f.emu.IAM.AddRole("OtherRole")
	ctx := testCtx(t)
	profiles := f.provider.discovery.profiles
	name := ManagedInstanceProfileName(testCluster, "us-east-1", "web")
	iamCalls := func() map[string]int {
		out := map[string]int{}
		for k, v := range f.emu.Calls() {
			if strings.HasPrefix(k, "IAM.") {
				out[strings.TrimPrefix(k, "IAM.")] = v
			}
		}
		return out
	}
	step := func(what string, nc *stevedorev1.EC2NodeClass, wantProblem string, wantCalls map[string]int) {
		t.Helper()
		before := iamCalls()
		got, err := profiles.resolve(ctx, nc)
		var problem *errProfileProblem
		switch {
		case wantProblem == "" && err != nil:
			t.Fatalf("%s: %v", what, err)
		case wantProblem != "" && (!asProblem(err, &problem) || !strings.Contains(problem.msg, wantProblem)):
			t.Fatalf("%s: error %v, want a problem saying %q", what, err, wantProblem)
		case nc.Name == "web" && got != name:
			t.Fatalf("%s: profile %s, want %s", what, got, name)
		}
		after := iamCalls()
		for action, n := range wantCalls {
			if after[action]-before[action] != n {
				t.Errorf("%s: %d %s calls, want %d", what, after[action]-before[action], action, n)
			}
		}
		for action := range after {
			if _, ok := wantCalls[action]; !ok && after[action] != before[action] {
				t.Errorf("%s: unexpected %s call", what, action)
			}
		}
	}

	step("no finalizer yet", profileClass("web", "KarpenterNodeRole-test", nil, false), "waiting for the stevedore.dev/termination finalizer", nil)
	if len(f.emu.IAM.InstanceProfiles()) != 0 {
		t.Fatal("a profile was created before the node class had its finalizer")
	}
	f.emu.IAM.AddRole("KarpenterNodeRole-test")
	step("created", profileClass("web", "KarpenterNodeRole-test", nil, true), "",
		map[string]int{"GetInstanceProfile": 1, "CreateInstanceProfile": 1, "AddRoleToInstanceProfile": 1})
	p := f.emu.IAM.InstanceProfiles()[name]
	if p.Path != "/stevedore/us-east-1/test/" || len(p.Roles) != 1 || p.Roles[0] != "KarpenterNodeRole-test" {
		t.Fatalf("profile %+v", p)
	}
	for k, v := range map[string]string{OwnershipTag(testCluster): "owned", TagEC2NodeClass: "web", "topology.kubernetes.io/region": "us-east-1",
		TagEKSClusterName: testCluster} {
		if p.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, p.Tags[k], v)
		}
	}
	step("at rest", profileClass("web", "KarpenterNodeRole-test", nil, true), "", map[string]int{})
	step("role changed, given as an ARN", profileClass("web", "arn:aws:iam::111122223333:role/OtherRole", nil, true), "",
		map[string]int{"GetInstanceProfile": 1, "RemoveRoleFromInstanceProfile": 1, "AddRoleToInstanceProfile": 1})
	if r := f.emu.IAM.InstanceProfiles()[name].Roles; len(r) != 1 || r[0] != "OtherRole" {
		t.Fatalf("roles %v after the change", r)
	}

	// a new Stevedore (restart) reuses the profile
	f.provider.discovery.profiles = newInstanceProfiles(profiles.iam, testCluster, "us-east-1")
	profiles = f.provider.discovery.profiles
	step("reused after a restart", profileClass("web", "OtherRole", nil, true), "", map[string]int{"GetInstanceProfile": 1})

	step("unknown role", profileClass("api", "NoSuchRole", nil, true), "role NoSuchRole does not exist",
		map[string]int{"GetInstanceProfile": 1, "CreateInstanceProfile": 1, "AddRoleToInstanceProfile": 1})
	step("user's profile", profileClass("own", "", new("MyProfile"), false), "instance profile MyProfile does not exist",
		map[string]int{"GetInstanceProfile": 1})
	f.emu.IAM.AddInstanceProfile("MyProfile", "KarpenterNodeRole-test")
	step("user's profile created", profileClass("own", "", new("MyProfile"), false), "", map[string]int{"GetInstanceProfile": 1})
	step("user's profile known", profileClass("own", "", new("MyProfile"), false), "", map[string]int{})

	f.emu.IAM.AddInstanceProfile(ManagedInstanceProfileName(testCluster, "us-east-1", "taken"), "KarpenterNodeRole-test")
	step("a profile of the same name not created by Stevedore", profileClass("taken", "KarpenterNodeRole-test", nil, true),
		"Stevedore does not take over a profile it did not create", map[string]int{"GetInstanceProfile": 1})

	if err := profiles.remove(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.emu.IAM.InstanceProfiles()[name]; ok {
		t.Fatal("the profile outlived its node class")
	}
	if err := profiles.remove(ctx, "web"); err != nil {
		t.Fatalf("removing a profile already gone: %v", err)
	}
	if err := profiles.remove(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.emu.IAM.InstanceProfiles()[ManagedInstanceProfileName(testCluster, "us-east-1", "taken")]; !ok {
		t.Fatal("a profile Stevedore did not create was deleted")
	}
	if _, ok := f.emu.IAM.InstanceProfiles()["MyProfile"]; !ok {
		t.Fatal("the user's profile was deleted")
	}
}

// TestLaunchesUseTheManagedInstanceProfile: the launch template names the profile Stevedore created, which the
// emulated CreateFleet checks exists.
func TestLaunchesUseTheManagedInstanceProfile(t *testing.T) {
	f := newFixture(t, nil)
	inst, err := f.provider.Create(testCtx(t), claim("nc-1", in(stevedorev1.LabelCapacityType, "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	want := ManagedInstanceProfileName(testCluster, "us-east-1", "default")
	got := f.emu.EC2.Instance(inst.ID)
	if got.LaunchTemplate.InstanceProfile != want {
		t.Fatalf("launched with instance profile %q, want %s", got.LaunchTemplate.InstanceProfile, want)
	}
}

func asProblem(err error, target **errProfileProblem) bool { return errors.As(err, target) }
