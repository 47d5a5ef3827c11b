/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// servedBy is the APIs an API server of a minor serves with its defaults, as far as the gated APIs go.
func servedBy(minor int) map[string]bool {
	out := map[string]bool{"resourceslices.v1.resource.k8s.io": minor >= 34}
	out["devicetaintrules.v1.resource.k8s.io"] = minor >= 37
	return out
}

func TestFitGatesTurnsOffWhatTheServerDoesNotServe(t *testing.T) {
	for _, tc := range []struct {
		name string
		// served are the gated APIs the server serves (by formatGVR); set, the user's --feature-gates
		served map[string]bool
		set    map[string]bool
		// wantOff are the gates turned off; wantErr a part of the error
		wantOff []featuregate.Feature
		wantErr string
	}{
		{name: "a 1.37 server serves every API the defaults watch", served: servedBy(37)},
		{name: "a 1.36 server has no device taint rules: the gate goes off", served: servedBy(36),
			wantOff: []featuregate.Feature{features.DRADeviceTaintRules}},
		{name: "a 1.34 server likewise", served: servedBy(34), wantOff: []featuregate.Feature{features.DRADeviceTaintRules}},
		{name: "a 1.33 server has no resource.k8s.io/v1, which cannot be turned off", served: servedBy(33),
			wantErr: "Kubernetes 1.34 or newer"},
		{name: "the Workload API turned on where the server serves it",
			served: map[string]bool{"resourceslices.v1.resource.k8s.io": true, "devicetaintrules.v1.resource.k8s.io": true,
				"podgroups.v1beta1.scheduling.k8s.io": true},
			set: map[string]bool{string(features.GenericWorkload): true}},
		{name: "the Workload API turned on where the server does not serve it", served: servedBy(37),
			set: map[string]bool{string(features.GenericWorkload): true}, wantErr: "--feature-gates turns GenericWorkload on"},
		{name: "device taint rules turned off by the user: nothing asked", served: servedBy(36),
			set: map[string]bool{string(features.DRADeviceTaintRules): false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
			if err := fg.SetFromMap(tc.set); err != nil {
				t.Fatal(err)
			}
			var asked []string
			served := func(gvr schema.GroupVersionResource) (bool, error) {
				asked = append(asked, formatGVR(gvr))
				return tc.served[formatGVR(gvr)], nil
			}
			off, err := fitGates(fg, served)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case err != nil:
				return
			}
			var got []featuregate.Feature
			for _, c := range off {
				got = append(got, c.gate)
				if fg.Enabled(c.gate) {
					t.Errorf("%s reported off but still on", c.gate)
				}
			}
			if strings.Join(featureNames(got), ",") != strings.Join(featureNames(tc.wantOff), ",") {
				t.Errorf("turned off %v, want %v (asked about %v)", got, tc.wantOff, asked)
			}
		})
	}
}

func TestFitGatesStopsAtADiscoveryError(t *testing.T) {
	fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	boom := errors.New("connection refused")
	if _, err := fitGates(fg, func(schema.GroupVersionResource) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the discovery error", err)
	}
	if !fg.Enabled(features.DRADeviceTaintRules) {
		t.Error("a gate was turned off although the server's APIs are not known")
	}
}

func featureNames(fs []featuregate.Feature) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}
