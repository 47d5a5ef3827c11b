/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package offline

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

func TestOfflineProvider(t *testing.T) {
	maxPods := int32(20)
	classes := map[string]*stevedorev1.EC2NodeClass{
		"small-pods": {Spec: stevedorev1.EC2NodeClassSpec{Kubelet: &stevedorev1.KubeletConfiguration{MaxPods: &maxPods}}},
		"default":    {},
	}
	p, err := New(Options{Catalog: catalog.Default(), NodeClasses: classes, VMMemoryOverheadPercent: 7.5,
		NodeClassHash: func(nc *stevedorev1.EC2NodeClass) string {
			if nc.Spec.Kubelet != nil {
				return "with-kubelet"
			}
			return "plain"
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool := func(class string) *stevedorev1.NodePool {
		np := &stevedorev1.NodePool{}
		np.Spec.Template.Spec.NodeClassRef = &stevedorev1.NodeClassReference{Name: class}
		return np
	}
	podsOf := func(class string) int64 {
		its, err := p.InstanceTypes(ctx, pool(class))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range its {
			if it.Name == "m5.xlarge" {
				q := it.Allocatable()[corev1.ResourcePods]
				return q.Value()
			}
		}
		t.Fatal("no m5.xlarge in the catalog")
		return 0
	}
	if got := podsOf("small-pods"); got != 20 {
		t.Errorf("m5.xlarge pods under kubelet maxPods 20 = %d", got)
	}
	if got := podsOf("default"); got != 58 {
		t.Errorf("m5.xlarge pods by ENI limit = %d, want 58", got)
	}

	for _, tc := range []struct {
		class, hash, want string
	}{{"default", "plain", ""}, {"default", "older", "NodeClassDrift"}, {"default", "", ""}, {"unknown", "older", ""}} {
		claim := &stevedorev1.NodeClaim{}
		claim.Spec.NodeClassRef = &stevedorev1.NodeClassReference{Name: tc.class}
		claim.Annotations = map[string]string{stevedorev1.AnnotationNodeClassHash: tc.hash}
		if got, err := p.IsDrifted(ctx, claim); err != nil || got != tc.want {
			t.Errorf("IsDrifted(class %s, hash %q) = %q, %v; want %q", tc.class, tc.hash, got, err, tc.want)
		}
	}
	if _, err := p.Create(ctx, &stevedorev1.NodeClaim{}); !errors.Is(err, ErrOffline) {
		t.Errorf("Create: %v, want ErrOffline", err)
	}
	if err := p.Delete(ctx, "i-1"); !errors.Is(err, ErrOffline) {
		t.Errorf("Delete: %v, want ErrOffline", err)
	}
}
