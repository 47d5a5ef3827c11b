/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/client"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
)

// TestTheHostsInformersDropManagedFields: a node read through the nodes informer trimmed before it starts has no
// managed fields, and the rest of it is whole.
func TestTheHostsInformersDropManagedFields(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	// NewClientset manages the fields itself and drops those given: the simple one serves the node as it is
	kf := informers.NewSharedInformerFactory(fake.NewSimpleClientset(node), time.Hour) //nolint:staticcheck // SA1019: see above
	nodes := kf.Core().V1().Nodes()
	trimmed(nodes.Informer())
	ctx := t.Context()
	kf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		t.Fatal("the nodes informer did not sync")
	}
	got, err := nodes.Lister().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil {
		t.Errorf("managed fields kept: %v", got.ManagedFields)
	}
	if got.Labels["team"] != "a" {
		t.Errorf("labels = %v, want team=a kept", got.Labels)
	}
	// once started, an informer keeps its transform (and says so) rather than changing it midway
	if err := nodes.Informer().SetTransform(client.TrimManagedFields); err == nil {
		t.Error("SetTransform on a started informer succeeded; trimmed relies on it being refused")
	}
}

// TestSurgeOffLeavesDisruptionWithoutASurger: with the surge argument off, disruption gets no surger, so every pod
// of a disrupted node is evicted and no Deployment or ReplicaSet is written; on, it gets one.
func TestSurgeOffLeavesDisruptionWithoutASurger(t *testing.T) {
	kube := fake.NewClientset()
	in := newInformers(informers.NewSharedInformerFactory(kube, time.Hour),
		externalversions.NewSharedInformerFactory(stevedorefake.NewSimpleClientset(), time.Hour))
	for _, on := range []bool{false, true} {
		w := &wiring{args: config.ProvisionerArgs{Surge: &on}, kube: kube, in: in}
		if got := w.surger(nil); (got != nil) != on {
			t.Errorf("surge: %v gives a surger %v", on, got != nil)
		}
	}
}
