/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/disruption/dryrun"
)

// disruptInput are the settings of `plan --disrupt` besides the objects.
type disruptInput struct {
	catalog                 *catalog.File
	vmMemoryOverheadPercent float64
	minValuesPolicy         string
	spotToSpot              bool
	output                  string
}

// disruptOutput is `scheduler plan --disrupt -o json`.
type disruptOutput struct {
	// Command is what the pass does (absent when nothing).
	Command *disruptCommand `json:"command,omitempty"`
	// Currency of the costs and prices.
	Currency   string        `json:"currency"`
	CostBefore float64       `json:"costBefore"`
	CostAfter  float64       `json:"costAfter"`
	Nodes      []disruptNode `json:"nodes"`
}

type disruptCommand struct {
	Method       string             `json:"method"`
	Reason       string             `json:"reason"`
	Action       string             `json:"action"`
	Nodes        []string           `json:"nodes"`
	Replacements []disruptReplacing `json:"replacements"`
	PodsMoved    int                `json:"podsMoved"`
	// Surging are the moved pods ("namespace/name") whose owners surge (make-before-break), Evicted the others
	// with why they are evicted; both empty when the input has no ReplicaSets (every pod is evicted).
	Surging []string          `json:"surging,omitempty"`
	Evicted map[string]string `json:"evicted,omitempty"`
	Savings float64           `json:"savings"`
	// Scores of the move for the Balanced NodePools among its nodes'.
	Scores string `json:"scores,omitempty"`
}

type disruptReplacing struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

type disruptNode struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Pods         int     `json:"pods"`
	// Action is delete or replace for the command's nodes, keep for the others.
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// dryRunDisruption runs one disruption pass offline over the objects and prints it.
func dryRunDisruption(ctx context.Context, w io.Writer, objs []runtime.Object, in disruptInput) error {
	res, err := dryrun.Run(ctx, objs, dryrun.Options{Catalog: in.catalog, Args: config.ProvisionerArgs{
		VMMemoryOverheadPercent: &in.vmMemoryOverheadPercent, MinValuesPolicy: in.minValuesPolicy, SpotToSpotConsolidation: in.spotToSpot}})
	if err != nil {
		return err
	}
	out := renderDryRun(res)
	out.Currency = currency(in.catalog)
	if in.output == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printDryRun(w, out)
}

func renderDryRun(res *disruption.DryRunResult) disruptOutput {
	out := disruptOutput{CostBefore: res.CostBefore, CostAfter: res.CostAfter, Nodes: []disruptNode{}}
	action := "keep"
	if cmd := res.Command; cmd != nil {
		action = cmd.Action()
		c := &disruptCommand{Method: cmd.Method, Reason: string(cmd.Reason), Action: cmd.Action(), PodsMoved: cmd.Pods, Savings: cmd.Savings(),
			Replacements: []disruptReplacing{}, Scores: cmd.DescribeScores()}
		for _, cand := range cmd.Candidates {
			c.Nodes = append(c.Nodes, cand.Node.Name)
			for pod := range cand.Surging {
				c.Surging = append(c.Surging, pod)
			}
			for pod, why := range cand.Evicted {
				if c.Evicted == nil {
					c.Evicted = map[string]string{}
				}
				c.Evicted[pod] = why
			}
		}
		sort.Strings(c.Surging)
		for _, r := range cmd.Replacements {
			c.Replacements = append(c.Replacements, disruptReplacing{InstanceType: r.InstanceType.Name, Zone: r.Offering.Zone,
				CapacityType: r.Offering.CapacityType, Price: r.Offering.Price})
		}
		out.Command = c
	}
	for _, n := range res.Nodes {
		cand := n.Candidate
		dn := disruptNode{Name: cand.Node.Name, NodePool: cand.NodePool.Name, InstanceType: cand.NodeClaim.Status.InstanceType,
			CapacityType: cand.NodeClaim.Status.CapacityType, Price: cand.Price, Pods: len(cand.Pods), Action: "keep",
			Reason: string(n.Reason), Message: n.Message}
		if n.Taken {
			dn.Action = action
		}
		out.Nodes = append(out.Nodes, dn)
	}
	return out
}

func printDryRun(w io.Writer, out disruptOutput) error {
	if c := out.Command; c != nil {
		moved := fmt.Sprintf("%d pods move", c.PodsMoved)
		if c.PodsMoved == 1 {
			moved = "1 pod moves"
		}
		fmt.Fprintf(w, "%s (%s): %s %s, %s", c.Method, c.Reason, c.Action, strings.Join(c.Nodes, ", "), moved)
		if len(c.Surging) > 0 {
			fmt.Fprintf(w, "; surge %s", strings.Join(c.Surging, ", "))
		}
		for _, pod := range slices.Sorted(maps.Keys(c.Evicted)) {
			fmt.Fprintf(w, "; evict %s (%s)", pod, c.Evicted[pod])
		}
		for _, r := range c.Replacements {
			fmt.Fprintf(w, "; launches %s/%s/%s at %s/h", r.InstanceType, r.Zone, r.CapacityType, money(out.Currency, fmt.Sprintf("%.4f", r.Price)))
		}
		fmt.Fprintln(w)
		if c.Scores != "" {
			fmt.Fprintln(w, c.Scores)
		}
	} else {
		fmt.Fprintln(w, "nothing to do")
	}
	fmt.Fprintf(w, "cost: %s/h -> %s/h\n\n", money(out.Currency, fmt.Sprintf("%.4f", out.CostBefore)), money(out.Currency, fmt.Sprintf("%.4f", out.CostAfter)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODEPOOL\tTYPE\tCAPACITY\tPRICE/H\tPODS\tACTION\tWHY")
	for _, n := range out.Nodes {
		why := "-"
		if n.Reason != "" {
			why = n.Reason + ": " + n.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\t%s\t%s\n", n.Name, n.NodePool, n.InstanceType, n.CapacityType, n.Price, n.Pods, n.Action, why)
	}
	return tw.Flush()
}
