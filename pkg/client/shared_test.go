/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package client

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func discoveryServing(lists ...*metav1.APIResourceList) (*fakediscovery.FakeDiscovery, *fake.Clientset) {
	cs := fake.NewClientset()
	disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = lists
	return disc, cs
}

func TestSharedServed(t *testing.T) {
	quotas := schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Resource: "capacityquotas"}
	served := &metav1.APIResourceList{GroupVersion: "autoscaling.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "capacityquotas"}}}
	otherOnly := &metav1.APIResourceList{GroupVersion: "autoscaling.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "capacitybuffers"}}}
	for _, tc := range []struct {
		name          string
		lists         []*metav1.APIResourceList
		fails         bool
		servedOnError bool
		want, wantErr bool
	}{
		{name: "served", lists: []*metav1.APIResourceList{served}, want: true},
		{name: "group version absent", want: false},
		{name: "group version served without the resource", lists: []*metav1.APIResourceList{otherOnly}, want: false},
		{name: "discovery fails, counted as served", fails: true, servedOnError: true, want: true, wantErr: true},
		{name: "discovery fails, counted as absent", fails: true, want: false, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disc, cs := discoveryServing(tc.lists...)
			if tc.fails {
				cs.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			var s Shared
			got, err := s.Served(disc, quotas, tc.servedOnError)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("Served = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
			// decided once: what discovery says later changes nothing, and the failure is not reported again
			disc.Resources = []*metav1.APIResourceList{served}
			cs.ReactionChain = nil
			if again, err := s.Served(disc, quotas, tc.servedOnError); again != tc.want || err != nil {
				t.Errorf("second Served = %v, %v; want %v, nil", again, err, tc.want)
			}
		})
	}
}
