/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
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

func TestRequireCRDsNamesEveryMissingOne(t *testing.T) {
	for _, tc := range []struct {
		name    string
		served  []string
		wantErr string
	}{
		{name: "all served", served: stevedoreResources},
		{name: "no NodeOverlay", served: []string{"nodepools", "nodeclaims", "ec2nodeclasses", "capacitybuffers"},
			wantErr: "does not serve the CustomResourceDefinition nodeoverlays.stevedore.dev (stevedore.dev/v1): install Stevedore's CRDs"},
		{name: "none", wantErr: "nodepools.stevedore.dev, nodeclaims.stevedore.dev, ec2nodeclasses.stevedore.dev, nodeoverlays.stevedore.dev, capacitybuffers.stevedore.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := requireCRDs(func(gvr schema.GroupVersionResource) (bool, error) {
				return gvr.Group == "stevedore.dev" && gvr.Version == "v1" && slices.Contains(tc.served, gvr.Resource), nil
			})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
	boom := errors.New("boom")
	if err := requireCRDs(func(schema.GroupVersionResource) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("a discovery error became %v", err)
	}
}

func TestRunsPluginFindsStevedoreInAProfile(t *testing.T) {
	multi := &schedconfig.Plugins{}
	multi.MultiPoint.Enabled = []schedconfig.Plugin{{Name: "Provisioner"}}
	postFilter := &schedconfig.Plugins{}
	postFilter.PostFilter.Enabled = []schedconfig.Plugin{{Name: "DefaultPreemption"}, {Name: "Provisioner"}}
	for _, tc := range []struct {
		name    string
		profile schedconfig.KubeSchedulerProfile
		want    bool
	}{
		{name: "default-scheduler", profile: schedconfig.KubeSchedulerProfile{SchedulerName: "default-scheduler"}},
		{name: "multi point", profile: schedconfig.KubeSchedulerProfile{Plugins: multi}, want: true},
		{name: "post filter", profile: schedconfig.KubeSchedulerProfile{Plugins: postFilter}, want: true},
		{name: "plugin config only", profile: schedconfig.KubeSchedulerProfile{PluginConfig: []schedconfig.PluginConfig{{Name: "Provisioner"}}}, want: true},
	} {
		if got := runsPlugin(tc.profile, "Provisioner"); got != tc.want {
			t.Errorf("%s: runsPlugin = %v, want %v", tc.name, got, tc.want)
		}
	}
}
