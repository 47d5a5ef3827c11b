/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLaunchGroupReadsWhatFormatLaunchGroupWrites(t *testing.T) {
	for _, tc := range []struct {
		value    string
		wantID   string
		wantSize int
		wantOK   bool
	}{
		{value: FormatLaunchGroup("a1b2", 4), wantID: "a1b2", wantSize: 4, wantOK: true},
		{value: "ml/train/8", wantID: "ml/train", wantSize: 8, wantOK: true},
		{value: ""},
		{value: "a1b2"},
		{value: "/4"},
		{value: "a1b2/"},
		{value: "a1b2/x"},
		{value: "a1b2/0"},
		{value: "a1b2/-3"},
	} {
		c := &NodeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationLaunchGroup: tc.value}}}
		id, size, ok := c.LaunchGroup()
		if id != tc.wantID || size != tc.wantSize || ok != tc.wantOK {
			t.Errorf("LaunchGroup of %q = %q, %d, %v; want %q, %d, %v", tc.value, id, size, ok, tc.wantID, tc.wantSize, tc.wantOK)
		}
	}
}
