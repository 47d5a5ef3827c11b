/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package operator

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
)

// TestOptionsFromArguments: the controllers' options carry the defaulted arguments, repair included (nil when off).
func TestOptionsFromArguments(t *testing.T) {
	decode := func(raw string) config.ProvisionerArgs {
		t.Helper()
		a, err := config.Decode(&runtime.Unknown{Raw: []byte(raw)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	o := OptionsFrom(decode(`{"clusterName": "c", "minValuesPolicy": "BestEffort"}`), nil)
	if o.ClusterName != "c" || !o.MinValuesBestEffort || !o.PodDeletionCost || o.BatchIdle != config.DefaultBatchIdle ||
		o.DisruptionPollInterval != config.DefaultDisruptionPollInterval || o.VMMemoryOverheadPercent != config.DefaultVMMemoryOverheadPercent {
		t.Errorf("options = %+v", o)
	}
	if o.Repair != nil {
		t.Errorf("repair options = %+v, want nil: repair is off by default", o.Repair)
	}
	if r := OptionsFrom(decode(`{"clusterName": "c", "nodeRepair": {"enabled": true}}`), nil).Repair; r == nil || len(r.Policies) != 7 || r.MaxUnhealthyPercent != 20 || r.DrainTimeout != 5*time.Minute || r.RebootWait != 10*time.Minute {
		t.Errorf("repair options = %+v", r)
	}
	r := OptionsFrom(decode(`{"clusterName": "c", "nodeRepair": {"enabled": true, "policies": [{"conditionType": "Ready", "conditionStatus": "Unknown", "toleration": "2m"}, {"conditionType": "KernelReady", "conditionStatus": "False", "toleration": "1m", "reboot": true}]}}`), nil).Repair
	if len(r.Policies) != 2 || r.Policies[0].Toleration != 2*time.Minute || !r.Policies[1].Reboot || r.Policies[1].ConditionType != "KernelReady" {
		t.Errorf("policies = %+v", r.Policies)
	}
	if r := OptionsFrom(decode(`{"clusterName": "c", "nodeRepair": {"enabled": false}, "podDeletionCost": false}`), nil); r.Repair != nil || r.PodDeletionCost {
		t.Errorf("repair %+v and pod deletion cost %v, want both off", r.Repair, r.PodDeletionCost)
	}
}
