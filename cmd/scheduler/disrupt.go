/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cloud/offline"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// disruptInput are the settings of `plan --disrupt` besides the objects.
type disruptInput struct {
	catalog                 *catalog.File
	vmMemoryOverheadPercent float64
	minValuesBestEffort     bool
	spotToSpot              bool
	output                  string
}

// disruptOutput is `scheduler plan --disrupt -o json`.
type disruptOutput struct {
	// Command is what the pass does (absent when nothing).
	Command    *disruptCommand `json:"command,omitempty"`
	CostBefore float64         `json:"costBefore"`
	CostAfter  float64         `json:"costAfter"`
	Nodes      []disruptNode   `json:"nodes"`
}

type disruptCommand struct {
	Method       string             `json:"method"`
	Reason       string             `json:"reason"`
	Action       string             `json:"action"`
	Nodes        []string           `json:"nodes"`
	Replacements []disruptReplacing `json:"replacements"`
	PodsMoved    int                `json:"podsMoved"`
	Savings      float64            `json:"savings"`
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

// dryRunDisruption builds the disruption controller over the objects (listers over them, the catalog in place of
// the cloud) and prints one pass.
func dryRunDisruption(ctx context.Context, w io.Writer, objs []runtime.Object, in disruptInput) error {
	var kept []runtime.Object
	for _, obj := range objs {
		switch obj.(type) {
		case *stevedorev1.NodePool, *stevedorev1.EC2NodeClass, *stevedorev1.NodeOverlay, *stevedorev1.NodeClaim, *corev1.Node,
			*corev1.Pod, *appsv1.DaemonSet, *policyv1.PodDisruptionBudget:
			kept = append(kept, obj)
		default:
			return fmt.Errorf("%s: scheduler plan --disrupt does not read this kind (it reads NodePools, EC2NodeClasses, "+
				"NodeOverlays, NodeClaims, Nodes, Pods, DaemonSets and PodDisruptionBudgets)", manifest.Name(obj))
		}
	}
	l, err := state.NewListers(kept...)
	if err != nil {
		return err
	}
	pools, err := l.NodePools.List(labels.Everything())
	if err != nil {
		return err
	}
	if len(pools) == 0 {
		return fmt.Errorf("no NodePool in the input")
	}
	classes := map[string]*stevedorev1.EC2NodeClass{}
	ncs, err := l.EC2NodeClasses.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, nc := range ncs {
		classes[nc.Name] = nc
	}
	overlays, err := l.NodeOverlays.List(labels.Everything())
	if err != nil {
		return err
	}
	if set := overlay.NewSet(overlays); len(set.Problems) > 0 {
		for _, o := range overlays {
			if why, ok := set.Problems[o.Name]; ok {
				return fmt.Errorf("NodeOverlay %s is not applied: %s", o.Name, why)
			}
		}
	}
	base, err := offline.New(offline.Options{Catalog: in.catalog, NodeClasses: classes, VMMemoryOverheadPercent: in.vmMemoryOverheadPercent,
		NodeClassHash: awscloud.NodeClassHash})
	if err != nil {
		return err
	}
	provider := overlay.NewProvider(base, l.NodeOverlays)
	provSim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		return err
	}
	prov := provision.New(provision.Options{Region: in.catalog.Region, SchedulerName: "stevedore", MinValuesBestEffort: in.minValuesBestEffort,
		Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims, NodePools: l.NodePools, Cloud: provider,
		Simulator: provSim,
		NodeClassHash: func(_ context.Context, ref *stevedorev1.NodeClassReference) string {
			if nc, ok := classes[ref.Name]; ok {
				return awscloud.NodeClassHash(nc)
			}
			return ""
		}})
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		return err
	}
	d := disruption.New(disruption.Options{Nodes: l.Nodes, Pods: l.Pods, PDBs: l.PDBs, NodeClaims: l.NodeClaims, NodePools: l.NodePools,
		Provisioner: prov, Cloud: provider, Simulator: sim, SpotToSpot: in.spotToSpot, Voluntary: true, DryRun: true,
		OverlaidTypes: func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool) {
			if len(overlays) == 0 {
				return nil, false
			}
			its, err := provider.InstanceTypes(ctx, np)
			return its, err == nil
		}})
	res, err := d.DryRun(ctx)
	if err != nil {
		return err
	}
	out := renderDryRun(res)
	if in.output == "json" {
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
		}
		for _, r := range cmd.Replacements {
			c.Replacements = append(c.Replacements, disruptReplacing{InstanceType: r.InstanceType.Name, Zone: r.Offering.Zone,
				CapacityType: r.Offering.CapacityType, Price: r.Offering.Price})
		}
		out.Command = c
	}
	for _, n := range res.Nodes {
		cand := n.Candidate
		dn := disruptNode{Name: cand.Node.Name, NodePool: cand.NodePool.Name, InstanceType: cand.Claim.Status.InstanceType,
			CapacityType: cand.Claim.Status.CapacityType, Price: cand.Price, Pods: len(cand.Pods), Action: "keep",
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
		for _, r := range c.Replacements {
			fmt.Fprintf(w, "; launches %s/%s/%s at $%.4f/h", r.InstanceType, r.Zone, r.CapacityType, r.Price)
		}
		fmt.Fprintln(w)
		if c.Scores != "" {
			fmt.Fprintln(w, c.Scores)
		}
	} else {
		fmt.Fprintln(w, "nothing to do")
	}
	fmt.Fprintf(w, "cost: $%.4f/h -> $%.4f/h\n\n", out.CostBefore, out.CostAfter)
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
