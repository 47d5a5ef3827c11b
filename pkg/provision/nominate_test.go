/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

func spreadPod(name string, app string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selectorApp string) *corev1.Pod {
	return test.Pod(name).Labels("app", app).Spread(corev1.LabelTopologyZone, maxSkew, when, "app", selectorApp).Obj()
}

func TestTakeSpreadRoom(t *testing.T) {
	tests := []struct {
		name string
		pods []*corev1.Pod
		want []bool
	}{
		{
			name: "maxSkew 1 lets one pod of the group be nominated per node",
			pods: []*corev1.Pod{spreadPod("a", "web", 1, corev1.DoNotSchedule, "web"), spreadPod("b", "web", 1, corev1.DoNotSchedule, "web")},
			want: []bool{true, false},
		},
		{
			name: "maxSkew 2 lets two",
			pods: []*corev1.Pod{spreadPod("a", "web", 2, corev1.DoNotSchedule, "web"), spreadPod("b", "web", 2, corev1.DoNotSchedule, "web"),
				spreadPod("c", "web", 2, corev1.DoNotSchedule, "web")},
			want: []bool{true, true, false},
		},
		{
			name: "ScheduleAnyway is not limited",
			pods: []*corev1.Pod{spreadPod("a", "web", 1, corev1.ScheduleAnyway, "web"), spreadPod("b", "web", 1, corev1.ScheduleAnyway, "web")},
			want: []bool{true, true},
		},
		{
			name: "different groups do not share the count",
			pods: []*corev1.Pod{spreadPod("a", "web", 1, corev1.DoNotSchedule, "web"), spreadPod("b", "api", 1, corev1.DoNotSchedule, "api")},
			want: []bool{true, true},
		},
		{
			name: "a constraint that does not select its own pod is not a group",
			pods: []*corev1.Pod{spreadPod("a", "web", 1, corev1.DoNotSchedule, "db"), spreadPod("b", "web", 1, corev1.DoNotSchedule, "db")},
			want: []bool{true, true},
		},
		{
			name: "pods without constraints are always nominated",
			pods: []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
			want: []bool{true, true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			counts := map[string]int{}
			for i, pod := range tc.pods {
				if got := takeSpreadRoom(counts, pod); got != tc.want[i] {
					t.Errorf("pod %s: takeSpreadRoom = %v, want %v", pod.Name, got, tc.want[i])
				}
			}
		})
	}
}
