/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestReadInstances(t *testing.T) {
	cases := []struct {
		name    string
		dataset string
		want    map[string]map[string]float64
		wantErr bool
	}{
		{
			name: "Linux on-demand prices by region; Local Zones, other systems and N/A left out",
			dataset: `[
 {"instance_type": "m5.large", "pricing": {
   "eu-west-1": {"linux": {"ondemand": "0.107", "reserved": {"yrTerm1Standard.noUpfront": "0.067"}}, "mswin": {"ondemand": "0.199"}},
   "us-west-2-lax-1": {"linux": {"ondemand": "0.12"}},
   "us-gov-west-1": {"linux": {"ondemand": "0.121"}}}},
 {"instance_type": "p5.48xlarge", "pricing": {
   "eu-west-1": {"linux": {"ondemand": "N/A"}},
   "ap-south-2": {"dedicated": {"ondemand": "5.0"}}}}
]`,
			want: map[string]map[string]float64{"eu-west-1": {"m5.large": 0.107}, "us-gov-west-1": {"m5.large": 0.121}},
		},
		{name: "no price at all", dataset: `[{"instance_type": "m5.large", "pricing": {}}]`, wantErr: true},
		{name: "not the dataset", dataset: `{"prices": {}}`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "instances.json")
			if err := os.WriteFile(path, []byte(tc.dataset), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readInstances(path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %t", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("prices %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnInstancesImportKeepsTheFilesThatExist(t *testing.T) {
	dir := t.TempDir()
	dataset := filepath.Join(dir, "instances.json")
	if err := os.WriteFile(dataset, []byte(`[{"instance_type": "m5.large", "pricing": {
 "eu-west-1": {"linux": {"ondemand": "0.107"}}, "us-east-1": {"linux": {"ondemand": "0.096"}}}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "ec2-on-demand-prices-us-east-1.json")
	if err := os.WriteFile(kept, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(options{instances: dataset, out: dir, generated: "2025-05-28", currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(kept); string(raw) != "{}\n" {
		t.Errorf("the existing us-east-1 file was replaced:\n%s", raw)
	}
	if _, err := os.Stat(filepath.Join(dir, "ec2-on-demand-prices-eu-west-1.json")); err != nil {
		t.Errorf("no eu-west-1 file: %v", err)
	}
	if err := run(options{out: dir, generated: "2025-05-28"}); err == nil {
		t.Error("no error without -from or -instances")
	}
}
