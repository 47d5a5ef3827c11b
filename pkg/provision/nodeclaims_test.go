/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestNodePoolHashClassifiesEveryTemplateField fails when a field is added to the NodePool template without a
// decision on whether changing it is drift: add it to hashed (and check the hash sees it) or to ignored (and clear
// it in NodePool.TemplateHash), and bump stevedorev1.NodePoolHashVersion when the hash changes.
func TestNodePoolHashClassifiesEveryTemplateField(t *testing.T) {
	hashed := map[string]bool{"ObjectMeta.Labels": true, "ObjectMeta.Annotations": true, "Spec.Taints": true,
		"Spec.StartupTaints": true, "Spec.NodeClassRef": true, "Spec.ExpireAfter": true, "Spec.TerminationGracePeriod": true}
	ignored := map[string]bool{"Spec.Requirements": true}
	var fields []string
	walk := func(prefix string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			fields = append(fields, prefix+typ.Field(i).Name)
		}
	}
	walk("ObjectMeta.", reflect.TypeOf(stevedorev1.TemplateObjectMeta{}))
	walk("Spec.", reflect.TypeOf(stevedorev1.NodeClaimTemplateSpec{}))
	for _, f := range fields {
		if !hashed[f] && !ignored[f] {
			t.Errorf("NodePool template field %s is neither hashed nor ignored by NodePool.TemplateHash", f)
		}
	}

	base := test.NodePool("np").Obj()
	h := base.TemplateHash()
	for name, change := range map[string]func(*stevedorev1.NodePool){
		"ObjectMeta.Labels":      func(np *stevedorev1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"a": "b"} },
		"ObjectMeta.Annotations": func(np *stevedorev1.NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"a": "b"} },
		"Spec.Taints": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"Spec.StartupTaints": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"Spec.NodeClassRef": func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" },
		"Spec.ExpireAfter":  func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.ExpireAfter = stevedorev1.NewDuration(1) },
		"Spec.TerminationGracePeriod": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 1}
		},
	} {
		np := base.DeepCopy()
		change(np)
		if np.TemplateHash() == h {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
	if np := test.NodePool("np").Require("k", corev1.NodeSelectorOpExists).Obj(); np.TemplateHash() != h {
		t.Error("changing the requirements changes the hash; drift checks them against the node's labels")
	}
}

func TestIsNodeInitializing(t *testing.T) {
	base := func(name string) *test.NodeClaimWrapper {
		return test.NodeClaim(name, "default").Launched("n-"+name, "m5.large", "us-east-1a", "on-demand", "0.0960")
	}
	launched, registered, initialized := base("launched"), base("registered").Registered(), base("initialized").Initialized()
	h := newHarness(t, launched.Obj(), registered.Obj(), initialized.Obj(),
		launched.NodeFor().Obj(), registered.NodeFor().Obj(), initialized.NodeFor().Obj(),
		test.Node("plain").Obj(), test.Node("orphan").Labels(stevedorev1.LabelNodeClaim, "gone").Obj())
	for node, want := range map[string]bool{"n-launched": false, "n-registered": true, "n-initialized": false,
		"plain": false, "orphan": false, "unknown": false} {
		if got := h.prov.IsNodeInitializing(node); got != want {
			t.Errorf("IsNodeInitializing(%s) = %v, want %v", node, got, want)
		}
	}
}

// TestInstanceTypesOfAfterARestart: a process that took over leadership and never solved yet (its instance-type
// cache is empty) still knows a launched NodeClaim's instance type, so its node gets the type's labels and the
// DaemonSets selecting on them.
func TestInstanceTypesOfAfterARestart(t *testing.T) {
	claim := test.NodeClaim("c1", "default").Created(t0).Launched("n1", "m5.large", "us-east-1a", stevedorev1.CapacityTypeOnDemand, "0.0960").Obj()
	agent := test.DaemonSet("amd64-agent").NodeSelector(corev1.LabelArchStable, "amd64").Req("cpu", "500m").Obj()
	agent.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	h := newHarness(t, test.NodePool("default").Obj(), claim, agent)
	its := h.prov.InstanceTypesOf(h.Ctx, claim)
	if its["m5.large"] == nil {
		t.Errorf("InstanceTypesOf = %d types without m5.large", len(its))
	}
	if ds := h.prov.DaemonSetPods(h.Ctx, claim); len(ds) != 1 {
		t.Errorf("DaemonSet pods on c1's node: %d, want the amd64 agent", len(ds))
	}
	unknown := test.NodeClaim("c2", "gone").Launched("n2", "m5.large", "us-east-1a", stevedorev1.CapacityTypeOnDemand, "0.0960").Obj()
	if got := h.prov.InstanceTypesOf(h.Ctx, unknown); len(got) != len(its) {
		t.Errorf("InstanceTypesOf a NodeClaim of a NodePool that is gone = %d types, want what is cached (%d)", len(got), len(its))
	}
}

// TestOfferingsChangedDropsTheTypeCache: after a launch found no capacity the next solve reads the offerings the
// cloud marked unavailable, not the ones cached before.
func TestOfferingsChangedDropsTheTypeCache(t *testing.T) {
	h := newHarness(t)
	pool := test.NodePool("default").Obj()
	if _, err := h.prov.InstanceTypes(h.Ctx, pool); err != nil {
		t.Fatal(err)
	}
	h.Cloud.NoCapacity("m5.large", "us-east-1a", "on-demand")
	if _, err := h.Cloud.Create(h.Ctx, test.NodeClaim("c1", "default").
		Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large").
		Require(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a").
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand).Obj()); err == nil {
		t.Fatal("launch with no capacity succeeded")
	}
	h.prov.OfferingsChanged()
	its, err := h.prov.InstanceTypes(h.Ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		for _, o := range it.Offerings {
			if it.Name == "m5.large" && o.Zone == "us-east-1a" && o.CapacityType == "on-demand" && o.Available {
				t.Error("m5.large on-demand in us-east-1a is still offered after insufficient capacity")
			}
		}
	}
}

// TestANodeClassChangeDropsACachedFailure: a NodePool whose types could not be listed (its EC2NodeClass not ready)
// is asked again as soon as a node class changes, not after the second its failure is kept, and the pods it
// refused are woken.
func TestANodeClassChangeDropsACachedFailure(t *testing.T) {
	h := newHarness(t)
	pool := test.NodePool("default").Obj()
	h.Cloud.FailNext(fake.CallInstanceTypes, &cloud.NodeClassNotReadyError{Name: "default", Reason: "waiting for the finalizer"})
	if _, err := h.prov.InstanceTypes(h.Ctx, pool); err == nil {
		t.Fatal("the first read did not fail")
	}
	if _, err := h.prov.InstanceTypes(h.Ctx, pool); err == nil {
		t.Fatal("the failure was not kept for its second")
	}
	refused := test.Pod("waiter").Pending().Req("cpu", "1").Obj()
	h.prov.refused.add(refused, "NodePool default cannot launch nodes now", h.prov.refused.seen())
	h.prov.NodeClassesChanged(h.Ctx)
	if _, err := h.prov.InstanceTypes(h.Ctx, pool); err != nil {
		t.Fatalf("after the node class changed: %v", err)
	}
	if h.prov.refused.recent(refused.UID) {
		t.Error("the pod is still taken as unprovisionable")
	}
}

// TestANodeClaimUnderACommitmentLaunchesInThePlansOrder: a node planned at a covered offering names its commitment,
// counts at its list price until launched, and launches its types in the plan's order (the covered ones first);
// a node at list price does neither.
func TestANodeClaimUnderACommitmentLaunchesInThePlansOrder(t *testing.T) {
	np := test.NodePool("pool").Obj()
	np.Normalize()
	m5 := &cloud.InstanceType{Name: "m5.large"}
	c5 := &cloud.InstanceType{Name: "c5.large"}
	for _, tc := range []struct {
		name      string
		offering  cloud.Offering
		wantPrice string
		wantName  string
		wantOrder string
	}{
		{"covered", cloud.Offering{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096e-6,
			Covered: &cloud.Covered{Commitment: "m5-plan", Use: 0.069, Room: 0.14, ListPrice: 0.096}}, "0.0960", "m5-plan", stevedorev1.LaunchOrderListed},
		{"at list price", cloud.Offering{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096}, "0.0960", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pn := &solver.PlannedNode{NodePool: np, PoolRequirements: scheduling.Requirements{}, Requirements: scheduling.Requirements{},
				InstanceType: m5, InstanceTypes: []*cloud.InstanceType{m5, c5}, Offering: tc.offering}
			claim := NewNodeClaim(pn, "")
			if got := claim.Annotations[stevedorev1.AnnotationNodeClaimPrice]; got != tc.wantPrice {
				t.Errorf("price %q, want %q", got, tc.wantPrice)
			}
			if got := claim.Annotations[stevedorev1.AnnotationCommitment]; got != tc.wantName {
				t.Errorf("commitment %q, want %q", got, tc.wantName)
			}
			if got := claim.Annotations[stevedorev1.AnnotationLaunchOrder]; got != tc.wantOrder {
				t.Errorf("launch order %q, want %q", got, tc.wantOrder)
			}
		})
	}
}
