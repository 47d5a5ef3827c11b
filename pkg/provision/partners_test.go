/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// A pod whose required affinity ties it to a pod of the batch is planned with the batch, though the scheduler
// has not tried it yet: planned alone, the batch's pod would take the preferred NodePool, whose taint its
// partner does not tolerate, and the partner would stay Pending.
func TestAffinityPartnersArePlannedWithTheBatch(t *testing.T) {
	tainted := test.NodePool("tainted").Weight(100).Obj()
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
	plain := test.NodePool("plain").Weight(10).Obj()
	target := func() *corev1.Pod {
		return test.Pod("target").Pending().Req("cpu", "250m").Labels("app", "cache").
			Toleration("dedicated", corev1.TolerationOpEqual, "cache", corev1.TaintEffectNoSchedule).Obj()
	}
	follower := func(name, app string) *corev1.Pod {
		pod := test.Pod(name).Pending().Req("cpu", "250m").Labels("app", "web").Obj()
		pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
		return pod
	}
	tests := []struct {
		name    string
		batch   []*corev1.Pod
		pending []*corev1.Pod
		// want maps each pod planned to its NodePool; pods not in it are not planned
		want map[string]string
	}{
		{name: "the partner of a pod in the batch joins it, and both go where both can",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{follower("web", "cache")},
			want: map[string]string{"target": "plain", "web": "plain"}},
		{name: "the pod a batch's pod is tied to joins it",
			batch: []*corev1.Pod{follower("web", "cache")}, pending: []*corev1.Pod{target()},
			want: map[string]string{"target": "plain", "web": "plain"}},
		{name: "a pending pod tied to nothing in the batch waits for its own try",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{follower("web", "db")},
			want: map[string]string{"target": "tainted"}},
		{name: "a pod of another scheduler is not planned",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{func() *corev1.Pod {
				pod := follower("web", "cache")
				pod.Spec.SchedulerName = corev1.DefaultSchedulerName
				return pod
			}()},
			want: map[string]string{"target": "tainted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tainted, plain}
			for _, pod := range append(append([]*corev1.Pod(nil), tc.batch...), tc.pending...) {
				objs = append(objs, pod)
			}
			h := newHarness(t, objs...)
			sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			h.prov.opts.Simulator, h.prov.opts.SchedulerName = sim, "stevedore"
			if err := h.prov.solveBatch(h.Ctx, tc.batch); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, pod := range append(append([]*corev1.Pod(nil), tc.batch...), tc.pending...) {
				claimName, planned := h.prov.plans.ClaimOf(pod.UID)
				if !planned {
					continue
				}
				claim, err := h.Stevedore.StevedoreV1().NodeClaims().Get(h.Ctx, claimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got[pod.Name] = claim.Labels[stevedorev1.LabelNodePool]
			}
			if len(got) != len(tc.want) {
				t.Fatalf("planned %v, want %v", got, tc.want)
			}
			for pod, pool := range tc.want {
				if got[pod] != pool {
					t.Errorf("planned %v, want %v", got, tc.want)
				}
			}
		})
	}
}
