/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package gang

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
)

// groups answers Get with its PodGroup or its error.
type groups struct {
	pg  *schedv1alpha1.PodGroup
	err error
}

func (g groups) Get(Key) (*schedv1alpha1.PodGroup, error) { return g.pg, g.err }

func TestOfAndLookup(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "w0", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train"}}}
	key, ok := Of(pod)
	if !ok || key != (Key{Namespace: "ml", Name: "train"}) || key.String() != "ml/train" {
		t.Fatalf("Of = %v, %v; want ml/train", key, ok)
	}
	if _, ok := Of(&corev1.Pod{}); ok {
		t.Errorf("a pod without the label is in a gang")
	}
	train := &schedv1alpha1.PodGroup{}
	for _, tc := range []struct {
		name    string
		groups  Groups
		wantErr string
	}{
		{name: "found", groups: groups{pg: train}},
		{name: "not served", wantErr: "the cluster does not serve PodGroups"},
		{name: "not found", groups: groups{err: apierrors.NewNotFound(schedv1alpha1.Resource("podgroups"), "train")},
			wantErr: "PodGroup ml/train (label scheduling.x-k8s.io/pod-group of the pod) does not exist"},
		{name: "another error", groups: groups{err: errors.New("boom")}, wantErr: "PodGroup ml/train: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, err := Lookup(tc.groups, key)
			if tc.wantErr == "" {
				if err != nil || pg != train {
					t.Errorf("Lookup = %v, %v; want the PodGroup", pg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Lookup error %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

func TestMinMemberIsAtLeastOne(t *testing.T) {
	for in, want := range map[int32]int{0: 1, 1: 1, 8: 8} {
		if got := MinMember(&schedv1alpha1.PodGroup{Spec: schedv1alpha1.PodGroupSpec{MinMember: in}}); got != want {
			t.Errorf("MinMember(%d) = %d, want %d", in, got, want)
		}
	}
}
