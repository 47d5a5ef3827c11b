/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLabelsMatterOnlyInTheKeysAPodsStateReads(t *testing.T) {
	zoneSpread := testPod("web", "1", "1Gi")
	zoneSpread.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	plain := testPod("plain", "1", "1Gi")
	base := map[string]string{corev1.LabelTopologyZone: "a", corev1.LabelInstanceTypeStable: "m5.large", "rack": "r1"}
	with := func(k, v string) map[string]string {
		out := map[string]string{}
		for key, val := range base {
			out[key] = val
		}
		if v == "-" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name          string
		pod           *corev1.Pod
		before, after map[string]string
		want          bool
	}{
		{"the zone the pod spreads over changes", zoneSpread, base, with(corev1.LabelTopologyZone, "b"), true},
		{"the zone the pod spreads over goes", zoneSpread, base, with(corev1.LabelTopologyZone, "-"), true},
		{"a label no constraint reads changes", zoneSpread, base, with(corev1.LabelInstanceTypeStable, "m5.xlarge"), false},
		{"nothing changes", zoneSpread, base, with("rack", "r1"), false},
		{"the zone changes for a pod without constraints", plain, base, with(corev1.LabelTopologyZone, "b"), false},
		{"a key another pod's anti-affinity reads changes", plain, base, with("rack", "r2"), true},
		{"a key another pod's anti-affinity reads appears", plain, with("rack", "-"), base, true},
		{"a key another pod's anti-affinity reads goes", plain, base, with("rack", "-"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &solve{antiKeys: map[string]bool{"rack": true}}
			if got := st.labelsMatter(tc.pod, tc.before, tc.after); got != tc.want {
				t.Errorf("labelsMatter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMergeCandsGivesTheSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		buckets := make([][]openCand, rng.Intn(10))
		var all []openCand
		for b := range buckets {
			for i := rng.Intn(20); i > 0; i-- {
				// few distinct marginals and leftovers, so that ties fall to the node's age
				c := openCand{n: &openNode{seq: len(all)}, marginal: float64(rng.Intn(3)), leftover: float64(rng.Intn(3))}
				buckets[b] = append(buckets[b], c)
				all = append(all, c)
			}
			slices.SortFunc(buckets[b], func(x, y openCand) int { return cmpCand(x, y) })
		}
		slices.SortFunc(all, func(x, y openCand) int { return cmpCand(x, y) })
		got := mergeCands(nil, buckets)
		if len(got) != len(all) {
			t.Fatalf("round %d: %d candidates merged, want %d", round, len(got), len(all))
		}
		for i := range got {
			if got[i].n != all[i].n {
				t.Fatalf("round %d: candidate %d is node %d, want %d", round, i, got[i].n.seq, all[i].n.seq)
			}
		}
	}
}

func cmpCand(x, y openCand) int {
	switch {
	case betterCand(x, y):
		return -1
	case betterCand(y, x):
		return 1
	}
	return 0
}

// Taking a pod moves a node being launched to where a stable sort of the whole list would put it, ties
// included: the order the solver tries them in is the one it had when it sorted them for each pod.
func TestResortInFlightKeepsTheStableSortsOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		st := &solve{}
		for i := rng.Intn(30); i > 0; i-- {
			// few distinct sizes, so that ties keep the order the nodes came in
			st.inflight = append(st.inflight, &inflightState{InFlightNode: InFlightNode{Name: fmt.Sprintf("n%02d", len(st.inflight))},
				free: vec{MilliCPU: 1000 * int64(rng.Intn(4)), Memory: 1 << 30 * int64(rng.Intn(3))}})
		}
		st.sortInFlight()
		for take := 0; take < 20 && len(st.inflight) > 0; take++ {
			i := rng.Intn(len(st.inflight))
			st.inflight[i].free = st.inflight[i].free.Sub(vec{MilliCPU: 500 * int64(rng.Intn(2)), Memory: 512 << 20 * int64(rng.Intn(2))})
			want := slices.Clone(st.inflight)
			(&solve{inflight: want}).sortInFlight()
			st.resortInFlight(i)
			for j := range want {
				if st.inflight[j] != want[j] {
					t.Fatalf("round %d, take %d: node %d is %s, want %s", round, take, j, st.inflight[j].Name, want[j].Name)
				}
			}
		}
	}
}
