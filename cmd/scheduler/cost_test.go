/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCost(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCostCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestCostSplitsADump: the dump's three on-demand nodes ($0.48 an hour) split into the shop namespace's pods and
// idle; with --top 1 the second workload is summed as other.
func TestCostSplitsADump(t *testing.T) {
	table, err := runCost(t, "-f", "testdata/disrupt-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shop ", "total         $0.4800", "StatefulSet  cache"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	raw, err := runCost(t, "-f", "testdata/disrupt-cluster.yaml", "-o", "json", "--top", "1")
	if err != nil {
		t.Fatal(err)
	}
	var doc costOutput
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	if math.Abs(doc.Total-0.48) > 1e-9 || math.Abs(doc.Pods+doc.DaemonSets+doc.Idle-doc.Total) > 1e-9 || len(doc.Nodes) != 3 {
		t.Errorf("total %v, pods %v, DaemonSets %v, idle %v, %d nodes; want 0.48 split over 3 nodes", doc.Total, doc.Pods, doc.DaemonSets,
			doc.Idle, len(doc.Nodes))
	}
	if len(doc.Workloads) != 2 || doc.Workloads[1].Name != "other" || math.Abs(doc.Workloads[0].Hourly+doc.Workloads[1].Hourly-doc.Pods) > 1e-9 {
		t.Errorf("workloads %+v; want the costliest and other, summing to the pods' %v", doc.Workloads, doc.Pods)
	}
}

// TestCostRefusesWhatItCannotRead: no input, two inputs, or an object of a kind it does not read is an error.
func TestCostRefusesWhatItCannotRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {ports: [{port: 80}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "either a dump"},
		{[]string{"-f", file, "--kubeconfig", file}, "either a dump"},
		{[]string{"-f", file}, "shop/web"},
		{[]string{"-f", "testdata/disrupt-cluster.yaml", "--top", "0"}, "--top"},
	} {
		if _, err := runCost(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cost %v: err = %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
