/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestNodeClassChanged(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: status, Reason: reason}
	}
	class := func(gen int64, finalizers []string, conds ...metav1.Condition) *stevedorev1.EC2NodeClass {
		return &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: gen, Finalizers: finalizers},
			Status: stevedorev1.EC2NodeClassStatus{Conditions: conds}}
	}
	fin := []string{stevedorev1.TerminationFinalizer}
	cases := []struct {
		name     string
		old, new *stevedorev1.EC2NodeClass
		want     bool
	}{
		{"a resync", class(1, fin, ready(metav1.ConditionTrue, "Ready")), class(1, fin, ready(metav1.ConditionTrue, "Ready")), false},
		{"the spec changed", class(1, fin), class(2, fin), true},
		{"the termination finalizer was added", class(1, nil, ready(metav1.ConditionFalse, "InstanceProfileNotReady")),
			class(1, fin, ready(metav1.ConditionFalse, "InstanceProfileNotReady")), true},
		{"it became ready", class(1, fin, ready(metav1.ConditionFalse, "InstanceProfileNotReady")), class(1, fin, ready(metav1.ConditionTrue, "Ready")), true},
		{"its first conditions", class(1, fin), class(1, fin, ready(metav1.ConditionTrue, "Ready")), true},
		{"a condition's reason only", class(1, fin, ready(metav1.ConditionFalse, "SubnetsNotReady")),
			class(1, fin, ready(metav1.ConditionFalse, "AMIsNotReady")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeClassChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("nodeClassChanged = %t, want %t", got, tc.want)
			}
		})
	}
}
