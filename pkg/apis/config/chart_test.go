/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestTheChartSchemaListsEveryPluginArgument: the values schema's settings are the Provisioner plugin's arguments
// (pkg/apis/config), no more, no fewer, besides the Karpenter settings it refuses by name.
func TestTheChartSchemaListsEveryPluginArgument(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "stevedore", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Settings struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"settings"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	args := reflect.TypeFor[ProvisionerArgs]()
	for i := range args.NumField() {
		name, _, _ := strings.Cut(args.Field(i).Tag.Get("json"), ",")
		if name != "" {
			want[name] = true
		}
	}
	for name, prop := range schema.Properties.Settings.Properties {
		karpenterOnly := strings.HasPrefix(prop.Description, "Karpenter setting with no Stevedore equivalent")
		if !want[name] && !karpenterOnly {
			t.Errorf("the schema allows settings.%s, which is no plugin argument", name)
		}
		if want[name] && karpenterOnly {
			t.Errorf("the schema refuses settings.%s as Karpenter's, but it is a plugin argument", name)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("the schema lacks settings.%s (a plugin argument)", name)
	}
}

// TestTheChartSchemaRefusesWhatValidationRefuses: for each probe (one setting and a value), the chart's values schema
// and the plugin's own validation agree: a value the scheduler would refuse at start (and crash-loop on) is refused
// by `helm install` already, and a value it takes passes the schema. Two checks the schema cannot express are left to
// the scheduler, which names the field at start: permitTimeout's 15m cap and batchMaxDuration against
// batchIdleDuration.
func TestTheChartSchemaRefusesWhatValidationRefuses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "stevedore", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("values.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	settings, err := compiler.Compile("values.schema.json#/properties/settings")
	if err != nil {
		t.Fatal(err)
	}
	probes := []struct {
		setting string
		value   string // JSON
	}{
		{"vmMemoryOverheadPercent", "0"}, {"vmMemoryOverheadPercent", "0.075"}, {"vmMemoryOverheadPercent", "0.999"},
		{"vmMemoryOverheadPercent", "1"}, {"vmMemoryOverheadPercent", "7.5"}, {"vmMemoryOverheadPercent", "49.9"},
		{"vmMemoryOverheadPercent", "50"}, {"vmMemoryOverheadPercent", "-1"},
		{"costMetricsTop", "0"}, {"costMetricsTop", "1"}, {"costMetricsTop", "1000"}, {"costMetricsTop", "1001"},
		{"maxInstanceTypes", "1"}, {"maxInstanceTypes", "200"}, {"maxInstanceTypes", "201"}, {"maxInstanceTypes", "-1"},
		{"rebalanceAction", `"Replace"`}, {"rebalanceAction", `"Event"`}, {"rebalanceAction", `"Cordon"`},
		{"minValuesPolicy", `"Strict"`}, {"minValuesPolicy", `"BestEffort"`}, {"minValuesPolicy", `"Lenient"`},
		{"solveTimeout", `"2s"`}, {"solveTimeout", `"-2s"`}, {"solveTimeout", `"1h30m"`}, {"solveTimeout", `"90"`},
		{"registrationTimeout", `"15m"`}, {"registrationTimeout", `"1d"`},
		{"nodeRepair", `{"maxUnhealthyPercent": 100}`}, {"nodeRepair", `{"maxUnhealthyPercent": 101}`},
		{"nodeRepair", `{"maxUnhealthyPercent": -5}`},
		{"gitOpsFieldManagers", `["argocd-controller"]`}, {"gitOpsFieldManagers", `[""]`}, {"gitOpsFieldManagers", `"argocd-controller"`},
		{"admissionWebhook", `{"port": 9443}`}, {"admissionWebhook", `{"port": 65536}`}, {"admissionWebhook", `{"port": -1}`},
	}
	for _, p := range probes {
		t.Run(p.setting+"="+p.value, func(t *testing.T) {
			values := fmt.Sprintf(`{"clusterName": "demo", "region": "us-east-1", %q: %s}`, p.setting, p.value)
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(values))
			if err != nil {
				t.Fatal(err)
			}
			schemaErr := settings.Validate(inst)
			var args ProvisionerArgs
			bindErr := json.Unmarshal([]byte(values), &args)
			var refused []string
			if bindErr != nil {
				refused = append(refused, bindErr.Error())
			} else {
				for _, e := range args.Defaults(nil).Validate() {
					refused = append(refused, e.Error())
				}
			}
			switch {
			case len(refused) > 0 && schemaErr == nil:
				t.Errorf("the scheduler refuses it (%s), but the chart's schema lets it through", strings.Join(refused, "; "))
			case len(refused) == 0 && schemaErr != nil:
				t.Errorf("the scheduler takes it, but the chart's schema refuses it: %v", schemaErr)
			}
		})
	}
}
