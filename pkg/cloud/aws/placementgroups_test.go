/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// placementClass is the fixture's node class with a placement group selector or a gang placement group.
func (f *fixture) placementClass(t *testing.T, name string, sel *stevedorev1.PlacementGroupSelector, gang string) {
	t.Helper()
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			PlacementGroupSelector:     sel, GangPlacementGroup: gang}})
}

// TestANodeClassLaunchesIntoThePlacementGroupItSelects: a node class selecting a placement group by name, id or
// tags resolves it and launches into it; a selector matching no group, or two, leaves the node class unresolved,
// saying why.
func TestANodeClassLaunchesIntoThePlacementGroupItSelects(t *testing.T) {
	f := newFixture(t, nil)
	for _, g := range []struct {
		name, strategy string
		tags           map[string]string
	}{{"training", "cluster", map[string]string{"team": "ml"}}, {"spread-a", "spread", map[string]string{"tier": "db"}},
		{"spread-b", "spread", map[string]string{"tier": "db"}}} {
		_, err := f.provider.ec2.CreatePlacementGroup(testCtx(t), &ec2.CreatePlacementGroupInput{GroupName: aws.String(g.name),
			Strategy: ec2types.PlacementStrategy(g.strategy), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypePlacementGroup,
				Tags: toEC2Tags(g.tags)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	id := f.emu.EC2.PlacementGroups()["training"].ID
	cases := []struct {
		class       string
		sel         stevedorev1.PlacementGroupSelector
		wantGroup   string
		wantProblem string
	}{
		{class: "by-name", sel: stevedorev1.PlacementGroupSelector{Name: "training"}, wantGroup: "training"},
		{class: "by-id", sel: stevedorev1.PlacementGroupSelector{ID: id}, wantGroup: "training"},
		{class: "by-tags", sel: stevedorev1.PlacementGroupSelector{Tags: map[string]string{"team": "ml"}}, wantGroup: "training"},
		{class: "unknown-name", sel: stevedorev1.PlacementGroupSelector{Name: "nope"}, wantProblem: "no available placement group has name nope"},
		{class: "unknown-id", sel: stevedorev1.PlacementGroupSelector{ID: "pg-0000"}, wantProblem: "no available placement group has id pg-0000"},
		{class: "two-groups", sel: stevedorev1.PlacementGroupSelector{Tags: map[string]string{"tier": "db"}},
			wantProblem: "matches 2 placement groups (spread-a, spread-b)"},
	}
	for _, tc := range cases {
		t.Run(tc.class, func(t *testing.T) {
			f.placementClass(t, tc.class, &tc.sel, "")
			c := claim("nc-"+tc.class, in(corev1.LabelInstanceTypeStable, "m5.large"), in(stevedorev1.LabelCapacityType, "on-demand"),
				in(corev1.LabelTopologyZone, "us-east-1a"))
			c.Spec.NodeClassRef.Name = tc.class
			inst, err := f.provider.Create(testCtx(t), c)
			if tc.wantProblem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantProblem) {
					t.Fatalf("Create = %v, %v; want the node class refused because %q", inst, err, tc.wantProblem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.emu.EC2.Instance(inst.ID).PlacementGroup; got != tc.wantGroup {
				t.Errorf("the instance runs in placement group %q, want %q", got, tc.wantGroup)
			}
		})
	}
}

// TestAGangLaunchesIntoAClusterPlacementGroupOfItsOwn: with gangPlacementGroup Cluster, the four NodeClaims of a
// gang launch in one fleet into a cluster placement group created for the gang and tagged for the cluster and the
// gang, while a NodeClaim of no gang launches into none. The garbage collector keeps the group while the gang's
// instances run, deletes it once they are gone and it has been idle for PlacementGroupIdle, and keeps a group just
// created.
func TestAGangLaunchesIntoAClusterPlacementGroupOfItsOwn(t *testing.T) {
	f := newFixture(t, nil)
	f.placementClass(t, "training", nil, stevedorev1.GangPlacementGroupCluster)
	const n = 4
	type outcome struct {
		inst *cloud.Instance
		err  error
	}
	done := make(chan outcome, n)
	for i := range n {
		c := claim(fmt.Sprintf("gang-%d", i), in(corev1.LabelInstanceTypeStable, "p4d.24xlarge"), in(stevedorev1.LabelCapacityType, "on-demand"))
		c.Spec.NodeClassRef.Name = "training"
		c.Annotations = map[string]string{stevedorev1.AnnotationLaunchGroup: stevedorev1.FormatLaunchGroup("ml/train-1", n)}
		go func() {
			inst, err := f.provider.Create(testCtx(t), c)
			done <- outcome{inst, err}
		}()
	}
	var ids []string
	for range n {
		o := <-done
		if o.err != nil {
			t.Fatal(o.err)
		}
		ids = append(ids, o.inst.ID)
	}
	groups := f.emu.EC2.PlacementGroups()
	if len(groups) != 1 {
		t.Fatalf("placement groups %v, want the gang's one", groups)
	}
	var group string
	for name, g := range groups {
		group = name
		if g.Strategy != "cluster" || g.Tags[TagGang] != "ml/train-1" || g.Tags[OwnershipTag(testCluster)] != ownedTagValue {
			t.Errorf("placement group %s: strategy %s, tags %v; want cluster, tagged for the cluster and gang ml/train-1", name, g.Strategy, g.Tags)
		}
	}
	for _, id := range ids {
		if got := f.emu.EC2.Instance(id).PlacementGroup; got != group {
			t.Errorf("gang instance %s runs in placement group %q, want %q", id, got, group)
		}
	}
	checkPlacementGroupRequestAllowed(t, f)
	if calls := f.emu.EC2.Calls(); calls["CreateFleet"] != 1 || calls["CreatePlacementGroup"] != 1 {
		t.Errorf("%d CreateFleet and %d CreatePlacementGroup calls, want one of each for the gang", calls["CreateFleet"], calls["CreatePlacementGroup"])
	}
	solo := claim("solo", in(corev1.LabelInstanceTypeStable, "m5.large"), in(stevedorev1.LabelCapacityType, "on-demand"))
	solo.Spec.NodeClassRef.Name = "training"
	inst, err := f.provider.Create(testCtx(t), solo)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.emu.EC2.Instance(inst.ID).PlacementGroup; got != "" {
		t.Errorf("a NodeClaim of no gang launched into placement group %q", got)
	}

	collect := func(want int, when string) {
		t.Helper()
		if deleted, err := f.provider.CollectPlacementGroups(testCtx(t)); err != nil || deleted != want {
			t.Fatalf("%s: the collector deleted %d placement groups (%v), want %d", when, deleted, err, want)
		}
	}
	f.clock.Step(PlacementGroupIdle)
	collect(0, "while the gang runs")
	for _, id := range ids {
		if err := f.provider.Delete(testCtx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(testCtx(t), 10*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, id := range ids {
			if f.emu.EC2.Instance(id).State != "terminated" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the gang's instances did not terminate: %v", err)
	}
	collect(1, "once the gang is gone and the group idle")
	if groups := f.emu.EC2.PlacementGroups(); len(groups) != 0 {
		t.Errorf("placement groups %v remain", groups)
	}

	// a group created for a launch just now is kept, though nothing runs in it yet
	nc, _, err := f.provider.readyClass(testCtx(t), solo.Spec.NodeClassRef)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.provider.ensureGangPlacementGroup(testCtx(t), solo, nc, "ml/train-2"); err != nil {
		t.Fatal(err)
	}
	collect(0, "a group just created for a launch")
	f.clock.Step(PlacementGroupIdle)
	collect(1, "the same group, idle for PlacementGroupIdle")
}

// checkPlacementGroupRequestAllowed: the CreatePlacementGroup request carries the tags and the strategy the
// controller policy's statement for it requires.
func checkPlacementGroupRequestAllowed(t *testing.T, f *fixture) {
	t.Helper()
	policy := readPolicy(t)
	req := f.emu.EC2.LastRequest("CreatePlacementGroup")
	tags := map[string]string{}
	for j := 1; req.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", j)) != ""; j++ {
		tags[req.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", j))] = req.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Value", j))
	}
	allowed := false
	for _, st := range policy.Statement {
		if !slices.Contains(st.Action, "ec2:CreatePlacementGroup") {
			continue
		}
		strategy, _ := st.Condition["StringEquals"]["ec2:PlacementGroupStrategy"].(string)
		allowed = allowed || (requestTagsSatisfy(st.Condition, tags) && (strategy == "" || strategy == req.Get("Strategy")))
	}
	if !allowed || req.Get("TagSpecification.1.ResourceType") != "placement-group" {
		t.Errorf("CreatePlacementGroup (strategy %s, %s tags %v) satisfies no statement of the controller policy", req.Get("Strategy"),
			req.Get("TagSpecification.1.ResourceType"), tags)
	}
}

// TestAGangWithoutRoomLeavesNothingInItsPlacementGroup: a gang of four with room for three in its cluster
// placement group launches nothing (insufficient capacity, as for any gang), and the empty group is collected once
// idle.
func TestAGangWithoutRoomLeavesNothingInItsPlacementGroup(t *testing.T) {
	f := newFixture(t, nil)
	f.placementClass(t, "training", nil, stevedorev1.GangPlacementGroupCluster)
	f.emu.EC2.SetCapacity("p4d.24xlarge", "us-east-1a", "on-demand", 3)
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		c := claim(fmt.Sprintf("gang-%d", i), in(corev1.LabelInstanceTypeStable, "p4d.24xlarge"), in(stevedorev1.LabelCapacityType, "on-demand"),
			in(corev1.LabelTopologyZone, "us-east-1a"))
		c.Spec.NodeClassRef.Name = "training"
		c.Annotations = map[string]string{stevedorev1.AnnotationLaunchGroup: stevedorev1.FormatLaunchGroup("ml/train-3", n)}
		go func() {
			_, err := f.provider.Create(testCtx(t), c)
			errs <- err
		}()
	}
	for range n {
		var ice *cloud.InsufficientCapacityError
		if err := <-errs; !errors.As(err, &ice) {
			t.Errorf("a gang NodeClaim's launch gave %v, want InsufficientCapacityError", err)
		}
	}
	if live := f.emu.EC2.Instances(); len(live) != 0 {
		t.Errorf("%d instances launched for a gang without room, want none", len(live))
	}
	if groups := f.emu.EC2.PlacementGroups(); len(groups) != 1 {
		t.Fatalf("placement groups %v, want the gang's one", groups)
	}
	f.clock.Step(PlacementGroupIdle)
	if deleted, err := f.provider.CollectPlacementGroups(testCtx(t)); err != nil || deleted != 1 {
		t.Errorf("the collector deleted %d placement groups (%v), want the gang's empty one", deleted, err)
	}
}
