/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package report

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestReadyCondition(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = indexer.Add(&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "ready"}, Status: stevedorev1.EC2NodeClassStatus{
		Conditions: []metav1.Condition{{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue}}}})
	_ = indexer.Add(&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Status: stevedorev1.EC2NodeClassStatus{
		Conditions: []metav1.Condition{{Type: stevedorev1.ConditionReady, Status: metav1.ConditionFalse, Message: "no subnet matches"}}}})
	r := New(Options{NodeClasses: listers.NewEC2NodeClassLister(indexer)})
	tests := []struct {
		ref                 *stevedorev1.NodeClassReference
		wantStatus, wantWhy string
	}{
		{ref: &stevedorev1.NodeClassReference{Name: "ready"}, wantStatus: "True", wantWhy: "Ready"},
		{ref: &stevedorev1.NodeClassReference{Name: "broken"}, wantStatus: "False", wantWhy: "NodeClassNotReady"},
		{ref: &stevedorev1.NodeClassReference{Name: "gone"}, wantStatus: "False", wantWhy: "NodeClassNotFound"},
		{ref: nil, wantStatus: "False", wantWhy: "NodeClassMissing"},
	}
	for _, tc := range tests {
		np := test.NodePool("np").Obj()
		np.Spec.Template.Spec.NodeClassRef = tc.ref
		c := r.readyCondition(np)
		if string(c.Status) != tc.wantStatus || c.Reason != tc.wantWhy {
			t.Errorf("%+v: got %s/%s, want %s/%s", tc.ref, c.Status, c.Reason, tc.wantStatus, tc.wantWhy)
		}
	}
}

func TestGaugeValue(t *testing.T) {
	if got := gaugeValue("cpu", resource.MustParse("1500m")); got != 1.5 {
		t.Errorf("cpu 1500m = %v cores, want 1.5", got)
	}
	if got := gaugeValue("memory", resource.MustParse("1Gi")); got != 1<<30 {
		t.Errorf("memory 1Gi = %v bytes, want %d", got, 1<<30)
	}
}

// TestCostMetricsAreRefreshedEveryCostInterval: the first refresh prices the cluster, the next ones within
// CostInterval do not, and the first one CostInterval after the last priced does.
func TestCostMetricsAreRefreshedEveryCostInterval(t *testing.T) {
	r := New(Options{})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		after time.Duration
		want  bool
	}{
		{0, true},
		{10 * time.Second, false},
		{20 * time.Second, false},
		{30 * time.Second, true},
		{40 * time.Second, false},
		{65 * time.Second, true},
	}
	for _, s := range steps {
		if got := r.costDue(start.Add(s.after)); got != s.want {
			t.Errorf("at %v: cost due = %v, want %v", s.after, got, s.want)
		}
	}
}
