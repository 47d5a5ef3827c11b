/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
