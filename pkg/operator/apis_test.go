/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package operator

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/client"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
)

// The informers of an optional API are registered, and waited for, exactly where the arguments leave the API to
// Stevedore and the cluster serves it; a failed discovery counts as served except for the Workload API.
func TestOptionalAPIsRegisterTheInformersOfTheAPIsServed(t *testing.T) {
	gv := func(groupVersion string, resources ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: groupVersion}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
		}
		return l
	}
	all := []*metav1.APIResourceList{gv("scheduling.x-k8s.io/v1alpha1", "podgroups"), gv("scheduling.k8s.io/v1beta1", "podgroups"),
		gv("autoscaling.x-k8s.io/v1", "provisioningrequests"), gv("autoscaling.x-k8s.io/v1beta1", "capacitybuffers", "capacityquotas"),
		gv("stevedore.dev/v1", "nodepools", "commitments")}
	on, off := true, false
	type registered struct{ podGroups, workloadGroups, requests, buffers, quotas, commitments bool }
	for _, tc := range []struct {
		name             string
		served           []*metav1.APIResourceList
		discoveryFails   bool
		buffers, quotas  *bool
		want             registered
		wantOptionalSync int
	}{
		{name: "every API served and left to Stevedore", served: all, buffers: &on, quotas: &on,
			want: registered{true, true, true, true, true, true}, wantOptionalSync: 7},
		{name: "buffers and quotas left to another autoscaler", served: all, buffers: &off, quotas: &off,
			want: registered{podGroups: true, workloadGroups: true, requests: true, commitments: true}, wantOptionalSync: 5},
		{name: "only the coscheduling PodGroups served", served: all[:1], buffers: &on, quotas: &on,
			want: registered{podGroups: true}, wantOptionalSync: 1},
		{name: "Stevedore's CRDs of an older release, without Commitments", served: append(all[:4:4], gv("stevedore.dev/v1", "nodepools")),
			buffers: &on, quotas: &on, want: registered{true, true, true, true, true, false}, wantOptionalSync: 6},
		{name: "nothing served", buffers: &on, quotas: &on},
		{name: "discovery fails", discoveryFails: true, buffers: &on, quotas: &on,
			want: registered{podGroups: true, requests: true, buffers: true, quotas: true, commitments: true}, wantOptionalSync: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			disc := cs.Discovery().(*fakediscovery.FakeDiscovery)
			disc.Resources = tc.served
			if tc.discoveryFails {
				cs.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			in := newInformers(informers.NewSharedInformerFactory(cs, time.Hour),
				externalversions.NewSharedInformerFactory(stevedorefake.NewSimpleClientset(), time.Hour))
			base := len(in.synced())
			in.registerOptional(t.Context(), &client.Shared{}, disc,
				optionalAPIs(config.ProvisionerArgs{SharedCapacityBuffers: tc.buffers, SharedCapacityQuotas: tc.quotas}))
			got := registered{in.podGroups != nil, in.workloadGroups != nil, in.requests != nil && in.templates != nil,
				in.sharedBuffers != nil, in.quotas != nil, in.commitments != nil}
			if got != tc.want {
				t.Errorf("registered %+v, want %+v", got, tc.want)
			}
			if n := len(in.synced()) - base; n != tc.wantOptionalSync {
				t.Errorf("%d optional informers waited for, want %d", n, tc.wantOptionalSync)
			}
		})
	}
}
