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

	"github.com/spf13/cobra"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
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

// TestCostPricesAClusterKarpenterRuns: on a dump of a cluster Karpenter runs, every node is priced at the catalog's
// list price from its labels (Karpenter's two m5.2xlarge and the node group's m5.large), none left out.
func TestCostPricesAClusterKarpenterRuns(t *testing.T) {
	raw, err := runCost(t, "-f", "testdata/karpenter-cluster.yaml", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc costOutput
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	price := catalog.Default().Pricer()
	want := 2*price("m5.2xlarge", "us-east-1a", "on-demand") + price("m5.large", "us-east-1a", "on-demand")
	if len(doc.Nodes) != 3 || len(doc.Unpriced) != 0 || want == 0 || math.Abs(doc.Total-want) > 1e-9 {
		t.Errorf("%d nodes priced at $%v, left out %q; want 3 at $%v", len(doc.Nodes), doc.Total, doc.Unpriced, want)
	}
}

// regionDump writes the Karpenter cluster's dump moved to another region (its nodes' region and zone labels).
func regionDump(t *testing.T, region string) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/karpenter-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), region+".yaml")
	if err := os.WriteFile(dump, []byte(strings.ReplaceAll(string(raw), "us-east-1", region)), 0o600); err != nil {
		t.Fatal(err)
	}
	return dump
}

// TestPlanAndCostPriceADumpInItsOwnRegion: a dump of a cluster in eu-west-1, ap-east-2, cn-north-1 or us-gov-west-1 is read
// with that region's embedded catalog (from its nodes' labels): cost prices Karpenter's and the node group's nodes
// at that region's prices in its currency, plan plans the new nodes in its zones and prices Karpenter's beside
// them the same way. Where the embedded data has no prices of the region, both say whose are used.
func TestPlanAndCostPriceADumpInItsOwnRegion(t *testing.T) {
	for _, tc := range []struct {
		region, currency, warning string
	}{
		{region: "eu-west-1", currency: "USD"},
		{region: "ap-east-2", currency: "USD", warning: "warning: the embedded data has no prices of ap-east-2: us-east-1's are used"},
		{region: "cn-north-1", currency: "CNY"},
		{region: "us-gov-west-1", currency: "USD"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			dump := regionDump(t, tc.region)
			cat, err := catalog.ForRegion(tc.region)
			if err != nil {
				t.Fatal(err)
			}
			price := cat.Pricer()
			karpenters := 2 * price("m5.2xlarge", tc.region+"a", "on-demand")
			want := karpenters + price("m5.large", tc.region+"a", "on-demand")

			out, stderr, err := run(t, newCostCommand(), "-f", dump, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var c costOutput
			if err := json.Unmarshal([]byte(out), &c); err != nil {
				t.Fatal(err)
			}
			if c.Region != tc.region || c.Currency != tc.currency || len(c.Unpriced) != 0 || karpenters == 0 || math.Abs(c.Total-want) > 1e-9 {
				t.Errorf("cost: %v %s in %s, left out %q; want %v %s in %s", c.Total, c.Currency, c.Region, c.Unpriced, want, tc.currency, tc.region)
			}
			if (tc.warning == "") != !strings.Contains(stderr, "warning") || !strings.Contains(stderr, tc.warning) {
				t.Errorf("cost warns %q, want %q", stderr, tc.warning)
			}

			out, stderr, err = run(t, newPlanCommand(), "-f", dump, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var p planOutput
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatal(err)
			}
			if p.Region != tc.region || p.Currency != tc.currency || len(p.Nodes) == 0 {
				t.Fatalf("plan: %d nodes in %s priced in %s", len(p.Nodes), p.Region, p.Currency)
			}
			for _, n := range p.Nodes {
				if !strings.HasPrefix(n.Zone, tc.region) || n.Price != price(n.InstanceType, n.Zone, n.CapacityType) {
					t.Errorf("planned %s in %s at %v, want a zone of %s at its price", n.InstanceType, n.Zone, n.Price, tc.region)
				}
			}
			if p.Karpenter == nil || math.Abs(p.Karpenter.TotalPrice-karpenters) > 1e-9 {
				t.Errorf("plan prices Karpenter's nodes at %+v, want %v", p.Karpenter, karpenters)
			}
			if !strings.Contains(stderr, tc.warning) {
				t.Errorf("plan warns %q, want %q", stderr, tc.warning)
			}
		})
	}
}

// TestPlanAndCostSayWhenTheInputsDisagree: a dump whose nodes are in eu-west-1 read with --region us-east-1 gets a
// warning naming both regions from plan and cost; --region and a --catalog of another region are refused.
func TestPlanAndCostSayWhenTheInputsDisagree(t *testing.T) {
	dump := regionDump(t, "eu-west-1")
	for _, cmd := range []*cobra.Command{newPlanCommand(), newCostCommand()} {
		_, stderr, _ := run(t, cmd, "-f", dump, "--region", "us-east-1")
		if !strings.Contains(stderr, "warning: the input's nodes are 2 in eu-west-1, and the catalog is us-east-1's") {
			t.Errorf("%s --region us-east-1 on an eu-west-1 dump warns:\n%s", cmd.Name(), stderr)
		}
	}
	cat := filepath.Join(t.TempDir(), "catalog.json")
	raw, err := json.Marshal(catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cat, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*cobra.Command{newPlanCommand(), newCostCommand()} {
		if _, _, err := run(t, cmd, "-f", dump, "--region", "eu-west-1", "--catalog", cat); err == nil || !strings.Contains(err.Error(), "disagree") {
			t.Errorf("%s with --region eu-west-1 and a us-east-1 catalog: %v, want them named as disagreeing", cmd.Name(), err)
		}
	}
	_, stderr, _ := run(t, newCostCommand(), "-f", "testdata/karpenter-cluster.yaml")
	if strings.Contains(stderr, "warning") {
		t.Errorf("cost on a us-east-1 dump warns:\n%s", stderr)
	}
}

// TestCostShowsTheCommitments: the dump's three on-demand m5 nodes ($0.48 an hour) with a zonal m5.xlarge
// reservation ($0.12) and an m5 Savings Plan ($0.05 at 28% off): the reservation covers one m5.xlarge, the plan
// $0.05/0.72 of the list price of the next; the bill is the fees and the rest at list price.
func TestCostShowsTheCommitments(t *testing.T) {
	raw, err := runCost(t, "-f", "testdata/disrupt-cluster.yaml", "-f", "testdata/commitments.yaml", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc costOutput
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Commitments
	if c == nil || len(c.Commitments) != 2 {
		t.Fatalf("commitments %+v, want two", c)
	}
	covered := 0.192 + 0.05/0.72
	if ri := c.Commitments[0]; ri.Name != "m5xl-reservation" || ri.Used != 1 || ri.Nodes != 1 || ri.Unit != "instances" {
		t.Errorf("first applied %+v, want the reservation covering one m5.xlarge", ri)
	}
	if sp := c.Commitments[1]; sp.Name != "m5-plan" || math.Abs(sp.Used-0.05) > 1e-9 || sp.Nodes != 1 || sp.Unit != "$/h" {
		t.Errorf("then %+v, want the plan used whole on one node", sp)
	}
	if math.Abs(c.Covered-covered) > 1e-9 || math.Abs(c.Coverage-covered/0.48) > 1e-9 || math.Abs(c.Bill-(0.17+0.48-covered)) > 1e-9 ||
		math.Abs(c.ListPrice-0.48) > 1e-9 {
		t.Errorf("covered %v (%v), bill %v, list %v; want %v, %v, %v, 0.48", c.Covered, c.Coverage, c.Bill, c.ListPrice, covered, covered/0.48, 0.17+0.48-covered)
	}
	table, err := runCost(t, "-f", "testdata/disrupt-cluster.yaml", "-f", "testdata/commitments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"m5xl-reservation  ReservedInstances", "1 instances", "100%", "coverage: 54% of the on-demand nodes' list price",
		"bill with the commitments: $0.3886 an hour (fees $0.1700"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if _, err := runCost(t, "-f", "testdata/disrupt-cluster.yaml", "-f", "testdata/bad-commitment.yaml"); err == nil ||
		!strings.Contains(err.Error(), "the Commitment all-off cannot apply: spec.savingsPlan.discountPercent") {
		t.Errorf("a Commitment that cannot apply: %v, want an error naming it and its field", err)
	}
}
