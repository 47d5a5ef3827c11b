/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
)

// TestUnusedLaunchTemplatesAreDeletedAfterAnHour: a launch template of this cluster no launch used for an hour is
// deleted, and created again by the next launch that needs it; templates of other clusters and untagged ones are
// never touched; a restarted process counts the templates it finds as used when it first sees them.
func TestUnusedLaunchTemplatesAreDeletedAfterAnHour(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testCtx(t)
	first, err := f.provider.Create(ctx, claim("nc-1", in(corev1.LabelInstanceTypeStable, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range []struct {
		name string
		tags map[string]string
	}{
		{"stevedore/other-cluster/0123456789abcdef0123", map[string]string{OwnershipTag("other-cluster"): ownedTagValue}},
		{"handmade", nil},
	} {
		in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt.name), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(first.ImageID)}}
		if lt.tags != nil {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: toEC2Tags(lt.tags)}}
		}
		if _, err := f.provider.ec2.CreateLaunchTemplate(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	templates := func() []string {
		t.Helper()
		out, err := f.provider.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, lt := range out.LaunchTemplates {
			names = append(names, aws.ToString(lt.LaunchTemplateName))
		}
		return names
	}
	collect := func(want int) {
		t.Helper()
		n, err := f.provider.CollectLaunchTemplates(ctx)
		if err != nil || n != want {
			t.Fatalf("collected %d launch templates (%v), want %d; left: %v", n, err, want, templates())
		}
	}
	launch := func(name string) {
		t.Helper()
		if _, err := f.provider.Create(ctx, claim(name, in(corev1.LabelInstanceTypeStable, "m5.large"))); err != nil {
			t.Fatal(err)
		}
	}

	if got := len(templates()); got != 3 {
		t.Fatalf("%d launch templates after a launch, want 3: %v", got, templates())
	}
	collect(0)
	f.clock.Step(LaunchTemplateIdle - time.Minute)
	collect(0)
	f.clock.Step(time.Minute)
	collect(1)
	if got := templates(); len(got) != 2 {
		t.Fatalf("left %v, want the other cluster's and the handmade template", got)
	}
	created := f.emu.EC2.Calls()["CreateLaunchTemplate"]
	launch("nc-2")
	if f.emu.EC2.Calls()["CreateLaunchTemplate"] != created+1 {
		t.Fatal("the next launch did not create the deleted launch template again")
	}

	// a new process on the same account: what it finds is used as of the moment it first sees it
	restarted := newFixture(t, nil)
	restarted.provider.ec2 = f.provider.ec2
	restarted.clock.SetTime(f.clock.Now())
	if n, err := restarted.provider.CollectLaunchTemplates(ctx); err != nil || n != 0 {
		t.Fatalf("a restarted process deleted %d templates at once (%v)", n, err)
	}
	restarted.clock.Step(LaunchTemplateIdle)
	if n, err := restarted.provider.CollectLaunchTemplates(ctx); err != nil || n != 1 {
		t.Fatalf("a restarted process deleted %d idle templates an hour later (%v), want 1", n, err)
	}
}
