/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/cost"
)

// costOutput is `scheduler cost -o json`.
type costOutput struct {
	// Region whose prices price the nodes, and Currency they are in.
	Region     string         `json:"region"`
	Currency   string         `json:"currency"`
	Total      float64        `json:"total"`
	Pods       float64        `json:"pods"`
	DaemonSets float64        `json:"daemonSets"`
	Idle       float64        `json:"idle"`
	Namespaces []cost.Line    `json:"namespaces"`
	Workloads  []cost.Line    `json:"workloads"`
	Nodes      []costNodeLine `json:"nodes"`
	Unpriced   []string       `json:"unpriced,omitempty"`
	DaemonSet  []cost.Line    `json:"daemonSetsByName,omitempty"`
	Rule       string         `json:"rule"`
	// Commitments is how the Savings Plans and Reserved Instances declared cover the on-demand nodes.
	Commitments *commitmentsOutput `json:"commitments,omitempty"`
}

type commitmentsOutput struct {
	Commitments []commitmentLine `json:"commitments"`
	// Coverage is the share of the on-demand nodes' list price the commitments cover; OnDemand that list price,
	// Covered the part covered, Spot the other nodes' list price.
	Coverage float64 `json:"coverage"`
	OnDemand float64 `json:"onDemand"`
	Covered  float64 `json:"covered"`
	Spot     float64 `json:"spot"`
	// Fees are what the commitments cost an hour whether used or not (FeesUnknown counts those declared without
	// their rate); Bill is the hour's cost with them, ListPrice without.
	Fees        float64 `json:"fees"`
	FeesUnknown int     `json:"feesUnknown,omitempty"`
	Bill        float64 `json:"bill"`
	ListPrice   float64 `json:"listPrice"`
}

type commitmentLine struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`
	Unit     string  `json:"unit"`
	Capacity float64 `json:"capacity"`
	Used     float64 `json:"used"`
	Nodes    int     `json:"nodes"`
}

type costNodeLine struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Binding      string  `json:"bindingResource"`
	Pods         float64 `json:"pods"`
	DaemonSets   float64 `json:"daemonSets"`
	Idle         float64 `json:"idle"`
}

const costRule = "each node's hourly price split over its pods by their request of the node's binding resource (of cpu, memory " +
	"and extended resources, the one its pods request the largest fraction of) over its allocatable; DaemonSet pods and idle reported apart"

func newCostCommand() *cobra.Command {
	var files []string
	var kubeconfig, catalogFile, region, output string
	var top int
	cmd := &cobra.Command{
		Use:   "cost [-f dump.yaml ... | --kubeconfig path] [--top N] [-o table|json]",
		Short: "Print what the nodes cost an hour, by namespace and by workload",
		Long: `cost splits each node over the pods it runs: a pod pays the node's hourly price times its request of
the node's binding resource (of cpu, memory and extended resources such as GPUs, the one the node's pods request
the largest fraction of) over the node's allocatable of it. DaemonSet pods and the idle share are reported apart,
so the lines add up to the nodes' price. Nodes are priced as billed: spot and on-demand at the offering's price
with the NodeOverlays in force, reserved capacity at the on-demand rate; nodes Stevedore did not launch
(Karpenter's, a node group's) at the catalog's list price, from their labels. Where Commitments (Savings
Plans, Reserved Instances) are declared, it also prints how much of each the on-demand nodes use, the share of the
on-demand list price they cover, and the hour's bill with them.

It reads a live cluster (--kubeconfig) or a dump (-f, the NodePools, EC2NodeClasses, NodeOverlays, NodeClaims,
Nodes and Pods, e.g. kubectl get ... -o yaml).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(files) == 0) == (kubeconfig == "") {
				return fmt.Errorf("give either a dump with -f or a cluster with --kubeconfig")
			}
			if output != outputJSON && output != outputTable {
				return fmt.Errorf("-o must be json or table, not %q", output)
			}
			if top < 1 {
				return fmt.Errorf("--top must be at least 1, not %d", top)
			}
			in, err := readPlanInput(catalogFile, region, files)
			if err != nil {
				return err
			}
			ctx := context.Background()
			objs, cat, notes := in.objects, in.catalog, in.notes
			if kubeconfig != "" {
				if objs, err = liveObjects(ctx, kubeconfig); err != nil {
					return err
				}
				if cat, notes, err = catalogFor(catalogFile, region, objs); err != nil {
					return err
				}
			}
			warn(cmd.ErrOrStderr(), notes)
			r, unpriced, err := cost.FromObjects(ctx, objs, cat)
			if err != nil {
				return err
			}
			out := renderCost(r, unpriced, top)
			out.Region, out.Currency = cat.Region, currency(cat)
			return writeCost(cmd.OutOrStdout(), out, output)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML or JSON file of NodePools, EC2NodeClasses, NodeOverlays, NodeClaims, Nodes, Pods (repeatable)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "read the cluster this kubeconfig points at")
	cmd.Flags().StringVar(&catalogFile, "catalog", "", "instance-type catalog file (default: the embedded catalog of --region)")
	cmd.Flags().StringVar(&region, "region", "", "region whose embedded catalog prices the nodes (default: the region of the cluster's nodes, else us-east-1)")
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "json or table")
	cmd.Flags().IntVar(&top, "top", 10, "namespaces and workloads listed, costliest first; the rest are summed as other")
	return cmd
}

func liveObjects(ctx context.Context, kubeconfig string) ([]runtime.Object, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	kube, err := client.NewKube(cfg)
	if err != nil {
		return nil, err
	}
	sd, err := client.NewStevedore(cfg)
	if err != nil {
		return nil, err
	}
	return cost.Live(ctx, kube, sd)
}

// renderCost lists the top namespaces and workloads, costliest first (ties by name), the rest as "other".
func renderCost(r *cost.Report, unpriced []string, top int) costOutput {
	out := costOutput{Total: r.Total, Pods: r.Pods, DaemonSets: r.DaemonSets, Idle: r.Idle, Unpriced: unpriced, Rule: costRule,
		Namespaces: cost.Top(r.Namespaces(), top), Workloads: cost.Top(r.Workloads(), top), DaemonSet: cost.Top(r.DaemonSetLines(), top)}
	for _, n := range r.Nodes {
		out.Nodes = append(out.Nodes, costNodeLine{Name: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType, CapacityType: n.CapacityType,
			Price: n.Price, Binding: string(n.Binding), Pods: n.Pods, DaemonSets: n.DaemonSets, Idle: n.Idle})
	}
	if c := r.Commitments; c != nil {
		co := &commitmentsOutput{Coverage: c.Ratio(), OnDemand: c.OnDemand, Covered: c.CoveredOnDemand, Spot: c.Spot, Fees: c.Fees,
			FeesUnknown: c.FeesUnknown, Bill: c.Bill(), ListPrice: c.OnDemand + c.Spot}
		for _, u := range c.Commitments {
			co.Commitments = append(co.Commitments, commitmentLine{Name: u.Name, Kind: u.Kind(), Unit: u.Unit(), Capacity: u.Capacity(),
				Used: u.Used, Nodes: u.Nodes})
		}
		out.Commitments = co
	}
	return out
}

// writeCommitments prints the commitments' use and the hour's bill with and without them.
func writeCommitments(w io.Writer, c *commitmentsOutput, currency string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMITMENT\tKIND\tCAPACITY\tUSED\tUTILIZATION\tNODES")
	for _, l := range c.Commitments {
		util := "-"
		if l.Capacity > 0 {
			util = fmt.Sprintf("%.0f%%", 100*l.Used/l.Capacity)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", l.Name, l.Kind, commitmentAmount(l.Capacity, l.Unit, currency),
			commitmentAmount(l.Used, l.Unit, currency), util, l.Nodes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p := func(v float64) string { return money(currency, stevedorev1.FormatPrice(v)) }
	fmt.Fprintf(w, "coverage: %.0f%% of the on-demand nodes' list price (%s of %s an hour)\n", 100*c.Coverage, p(c.Covered), p(c.OnDemand))
	fees := p(c.Fees)
	if c.FeesUnknown > 0 {
		fees += fmt.Sprintf(" and %d without a declared rate", c.FeesUnknown)
	}
	fmt.Fprintf(w, "bill with the commitments: %s an hour (fees %s, on-demand not covered %s, spot %s); at list price: %s\n",
		p(c.Bill), fees, p(c.OnDemand-c.Covered), p(c.Spot), p(c.ListPrice))
	return nil
}

// commitmentAmount writes a commitment's capacity or use in its unit.
func commitmentAmount(v float64, unit, currency string) string {
	if unit == "$/h" {
		return money(currency, stevedorev1.FormatPrice(v)) + "/h"
	}
	return commitment.FormatAmount(v) + " " + unit
}

func writeCost(w io.Writer, out costOutput, output string) error {
	if output == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPER HOUR")
	for _, l := range out.Namespaces {
		fmt.Fprintf(tw, "%s\t%s\n", l.Namespace, money(out.Currency, stevedorev1.FormatPrice(l.Hourly)))
	}
	fmt.Fprintf(tw, "(DaemonSets)\t%s\n(idle)\t%s\ntotal\t%s\n\n", money(out.Currency, stevedorev1.FormatPrice(out.DaemonSets)),
		money(out.Currency, stevedorev1.FormatPrice(out.Idle)), money(out.Currency, stevedorev1.FormatPrice(out.Total)))
	fmt.Fprintln(tw, "NAMESPACE\tKIND\tWORKLOAD\tPER HOUR")
	for _, l := range out.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Namespace, l.Kind, l.Name, money(out.Currency, stevedorev1.FormatPrice(l.Hourly)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range out.Unpriced {
		fmt.Fprintln(w, "not counted:", u)
	}
	if out.Commitments != nil {
		fmt.Fprintln(w)
		return writeCommitments(w, out.Commitments, out.Currency)
	}
	return nil
}
