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
(Karpenter's, a node group's) at the catalog's list price, from their labels.

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
	return out
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
	return nil
}
