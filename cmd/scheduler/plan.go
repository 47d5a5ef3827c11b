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
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/devices"
	"github.com/stevedore-dev/stevedore/pkg/karpenter"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// outputJSON is the -o value that asks plan, plan --disrupt and version for JSON.
// The output formats of plan and cost.
const (
	outputJSON  = "json"
	outputTable = "table"
)

// planOutput is `scheduler plan -o json`.
type planOutput struct {
	// Region the nodes are planned in, and Currency their prices are in.
	Region   string `json:"region"`
	Currency string `json:"currency"`
	// Karpenter, for a dump of a cluster Karpenter runs, is what Karpenter's nodes cost now for the pods the plan
	// places anew.
	Karpenter *planKarpenter `json:"karpenter,omitempty"`
	Nodes     []planNode     `json:"nodes"`
	// Existing are the pods placed on the input's Nodes (room the cluster already has), by node.
	Existing      []planExisting      `json:"existing"`
	Unschedulable []planUnschedulable `json:"unschedulable"`
	TotalPrice    float64             `json:"totalPrice"`
	SolveSeconds  float64             `json:"solveSeconds"`
	// Commitments is the bill with the input's Commitments, the planned nodes beside the input's Nodes.
	Commitments *planCommitments `json:"commitments,omitempty"`
}

// planCommitments is what the input's Nodes and the planned nodes cost an hour with the Commitments: Bill (their
// fees, the on-demand hours they do not cover, spot), Coverage the share of the on-demand list price they cover,
// ListPrice the same nodes at list price.
type planCommitments struct {
	Bill      float64 `json:"bill"`
	Coverage  float64 `json:"coverage"`
	ListPrice float64 `json:"listPrice"`
}

type planNode struct {
	Name          string   `json:"name"`
	NodePool      string   `json:"nodePool"`
	InstanceType  string   `json:"instanceType"`
	InstanceTypes []string `json:"instanceTypes"`
	Zone          string   `json:"zone"`
	CapacityType  string   `json:"capacityType"`
	// ReservationID of a node planned in a capacity reservation.
	ReservationID string `json:"reservationID,omitempty"`
	// Commitment names the Savings Plan or Reserved Instances the node is planned under (its Price is the list
	// price, which the commitment pays).
	Commitment string  `json:"commitment,omitempty"`
	Price      float64 `json:"price"`
	// Accelerators of the chosen type, as its extended resources ("nvidia.com/gpu": 4).
	Accelerators map[string]int64 `json:"accelerators,omitempty"`
	// Devices the chosen type's DRA drivers will publish, by driver and model.
	Devices []planDevices `json:"devices,omitempty"`
	// PlacementGroup the node launches into, as its EC2NodeClass's placementGroupSelector selects it ("name
	// training-pg", "id pg-0123", "tags team=ml").
	PlacementGroup string   `json:"placementGroup,omitempty"`
	Pods           []string `json:"pods"`
}

// planDevices are identical devices of a node, as a DRA driver publishes them.
type planDevices struct {
	Driver  string `json:"driver"`
	Count   int    `json:"count"`
	Product string `json:"product,omitempty"`
	Memory  string `json:"memory,omitempty"`
}

type planKarpenter struct {
	Nodes      int     `json:"nodes"`
	Pods       int     `json:"pods"`
	TotalPrice float64 `json:"totalPrice"`
	// Unpriced are Karpenter's nodes whose offering the catalog does not have (not in TotalPrice).
	Unpriced []string `json:"unpriced,omitempty"`
}

type planExisting struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

type planUnschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// planInput is what plan reads: the catalog, the objects of the files, and the fields of Karpenter's objects among
// them that Stevedore does not read.
type planInput struct {
	catalog *catalog.File
	objects []runtime.Object
	ignored []string
	// notes say where the region and prices come from when the inputs disagree or the prices are estimates.
	notes []string
}

// readPlanInput reads the objects of the files, then the catalog (catalogFor).
func readPlanInput(catalogFile, region string, files []string) (*planInput, error) {
	in := &planInput{}
	dec := manifest.NewDecoder()
	for _, f := range files {
		o, err := dec.DecodeFile(f)
		if err != nil {
			return nil, err
		}
		in.objects = append(in.objects, o...)
	}
	in.ignored = dec.Ignored()
	var err error
	in.catalog, in.notes, err = catalogFor(catalogFile, region, in.objects)
	return in, err
}

// catalogFor is the catalog plan, cost and plan --disrupt price with: the --catalog file; else the embedded catalog
// of --region; else of the region most of the input's nodes are in (their topology.kubernetes.io/region label, ties
// to the first by name); else of us-east-1. The notes say so when the inputs disagree (nodes in another region, or
// --region and --catalog naming two) and when the embedded data has no prices of the region (another region's
// are carried over).
func catalogFor(catalogFile, region string, objs []runtime.Object) (*catalog.File, []string, error) {
	counts := nodeRegions(objs)
	var notes []string
	var cat *catalog.File
	if catalogFile != "" {
		c, err := catalog.ReadFile(catalogFile)
		if err != nil {
			return nil, nil, err
		}
		if region != "" && region != c.Region {
			return nil, nil, fmt.Errorf("--region %s and the catalog %s (of %s) disagree: give one of them", region, catalogFile, c.Region)
		}
		cat = c
	} else {
		if region == "" {
			region = mostNodes(counts)
		}
		if region == "" {
			region = catalog.Default().Region
		}
		c, err := catalog.ForRegion(region)
		if err != nil {
			return nil, nil, err
		}
		if from, ok := catalog.PricesCarriedOver(region); ok {
			notes = append(notes, fmt.Sprintf("the embedded data has no prices of %s: %s's are used, so prices are estimates "+
				"(give --catalog with a catalog of %s for its own)", region, from, region))
		}
		cat = c
	}
	if other := otherRegions(counts, cat.Region); other != "" {
		notes = append(notes, other)
	}
	return cat, notes, nil
}

// nodeRegions counts the input's nodes by region (their topology.kubernetes.io/region label).
func nodeRegions(objs []runtime.Object) map[string]int {
	regions := map[string]int{}
	for _, obj := range objs {
		if node, ok := obj.(*corev1.Node); ok {
			if r := node.Labels[corev1.LabelTopologyRegion]; r != "" {
				regions[r]++
			}
		}
	}
	return regions
}

// mostNodes is the region with the most nodes, ties to the first by name ("" with none).
func mostNodes(counts map[string]int) string {
	best := ""
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		if best == "" || counts[r] > counts[best] {
			best = r
		}
	}
	return best
}

// otherRegions says which regions the input's nodes are in when one is not the catalog's: the zones and prices of
// the answer are then the catalog's region's, not the cluster's.
func otherRegions(counts map[string]int, catalogRegion string) string {
	other := false
	for r := range counts {
		other = other || r != catalogRegion
	}
	if !other {
		return ""
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d in %s", counts[r], r))
	}
	return fmt.Sprintf("the input's nodes are %s, and the catalog is %s's: the zones and prices here are %s's "+
		"(give --region, or --catalog with a catalog of the cluster's region)", strings.Join(parts, ", "), catalogRegion, catalogRegion)
}

// noOwners says that every pod is previewed as evicted when the input has none of the ReplicaSets that say which
// pods would surge.
func noOwners(objs []runtime.Object) []string {
	for _, o := range objs {
		if _, ok := o.(*appsv1.ReplicaSet); ok {
			return nil
		}
	}
	return []string{"the input has no ReplicaSets: every pod is previewed as evicted; add deployments,replicasets,hpa " +
		"to the dump to preview which move by Surge (docs/disruption.md)"}
}

// currency is the currency of a catalog's prices.
func currency(c *catalog.File) string {
	if c.Currency == "" {
		return "USD"
	}
	return c.Currency
}

// money is an amount in a catalog's currency: $0.0960 in US dollars, 0.6520 CNY in another.
func money(currency string, amount string) string {
	if currency == "" || currency == "USD" {
		return "$" + amount
	}
	return amount + " " + currency
}

// warn prints what plan leaves out of Karpenter's objects, one line each.
func warn(w io.Writer, lines ...[]string) {
	for _, ls := range lines {
		for _, l := range ls {
			fmt.Fprintln(w, "warning:", l)
		}
	}
}

// writePlan prints a plan as JSON or as a table.
func writePlan(w io.Writer, out planOutput, output string) error {
	switch output {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case outputTable, "":
		return printPlanTable(w, out)
	}
	return fmt.Errorf("-o must be json or table, not %q", output)
}

func newPlanCommand() *cobra.Command {
	var files []string
	var catalogFile, region, output string
	var budget time.Duration
	var vmOverhead float64
	var minValuesPolicy string
	var disrupt, spotToSpot bool
	cmd := &cobra.Command{
		Use:   "plan -f nodepools.yaml -f pods.json [-f daemonsets.yaml] [--catalog catalog.json] [--disrupt] [-o json|table]",
		Short: "Print the nodes Stevedore would launch for the given pods, without a cluster or a cloud",
		Long: `plan runs Stevedore's provisioning solver offline: it reads NodePools, EC2NodeClasses, NodeOverlays, Pods, workloads
(Deployments, ReplicaSets, StatefulSets, Jobs and CronJobs, expanded into their pods), DaemonSets, RuntimeClasses,
Nodes and the pods bound to them, Commitments (Savings Plans and Reserved Instances, filled first) (and Lists of any
of these) from files, and prints the nodes it would launch, the
pods on each, the pods the existing nodes take, and the pods it could not place with the reason. Every placement is checked with kube-scheduler's own Filter plugins. Use it
before changing a NodePool ("what if"), and as the solver's benchmark harness.

With --disrupt it reads the cluster as it is (NodePools, EC2NodeClasses, NodeOverlays, NodeClaims, Nodes, the pods
bound to them, DaemonSets and PodDisruptionBudgets, e.g. kubectl get ... -o json) and prints what one pass of the
disruption loop would do (the same code as the live loop, without waiting for its validation delay and without
a cloud: AMI drift is not seen), the hourly cost before and after, and why it leaves every other node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("give the objects with -f (NodePools and the pods at least)")
			}
			if minValuesPolicy != config.MinValuesStrict && minValuesPolicy != config.MinValuesBestEffort {
				return fmt.Errorf("--min-values-policy must be Strict or BestEffort, not %q", minValuesPolicy)
			}
			if output != outputJSON && output != outputTable && output != "" {
				return fmt.Errorf("-o must be json or table, not %q", output)
			}
			in, err := readPlanInput(catalogFile, region, files)
			if err != nil {
				return err
			}
			warn(cmd.ErrOrStderr(), in.notes)
			ctx := context.Background()
			if disrupt {
				objs, problems, err := karpenter.AsStevedore(in.objects, in.catalog.Pricer())
				if err != nil {
					return err
				}
				warn(cmd.ErrOrStderr(), in.ignored, problems, noOwners(objs))
				return dryRunDisruption(ctx, cmd.OutOrStdout(), objs, disruptInput{catalog: in.catalog, vmMemoryOverheadPercent: vmOverhead,
					minValuesPolicy: minValuesPolicy, spotToSpot: spotToSpot, output: output})
			}
			return solvePlan(ctx, cmd, in, planSettings{budget: budget, vmOverhead: vmOverhead,
				minValuesBestEffort: minValuesPolicy == config.MinValuesBestEffort, output: output})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML or JSON file of NodePools, EC2NodeClasses, NodeOverlays, Pods, Lists, DaemonSets, Nodes (repeatable)")
	cmd.Flags().StringVar(&catalogFile, "catalog", "", "instance-type catalog file (default: the embedded catalog of --region)")
	cmd.Flags().StringVar(&region, "region", "", "region whose embedded catalog plans and prices (default: the region of the input's nodes, else us-east-1)")
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "json or table")
	cmd.Flags().DurationVar(&budget, "solve-timeout", time.Minute, "safety stop on the time the solver may spend improving the packing (its work is bounded by a count of moves; 0: the greedy packing alone)")
	cmd.Flags().Float64Var(&vmOverhead, "vm-memory-overhead-percent", 7.5, "memory share an instance does not report, as the plugin argument")
	cmd.Flags().StringVar(&minValuesPolicy, "min-values-policy", "Strict", "Strict or BestEffort, as the plugin argument minValuesPolicy")
	cmd.Flags().BoolVar(&disrupt, "disrupt", false, "print what one disruption pass would do to the given Nodes, NodeClaims and bound pods, and why each other node stays")
	cmd.Flags().BoolVar(&spotToSpot, "spot-to-spot-consolidation", false, "with --disrupt: as the plugin argument spotToSpotConsolidation")
	return cmd
}

// planSettings are the settings of a plan besides its input.
type planSettings struct {
	budget              time.Duration
	vmOverhead          float64
	minValuesBestEffort bool
	output              string
}

// solvePlan solves the input and prints the plan; a dump of a cluster Karpenter runs is previewed (the pods on
// Karpenter's nodes planned anew, beside what those nodes cost now).
func solvePlan(ctx context.Context, cmd *cobra.Command, in *planInput, set planSettings) error {
	preview, err := karpenter.NewPreview(in.objects, in.catalog.Pricer())
	if err != nil {
		return err
	}
	warn(cmd.ErrOrStderr(), in.ignored, preview.Problems)
	problem, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: preview.Objects, Catalog: in.catalog,
		VMMemoryOverheadPercent: set.vmOverhead, MinValuesBestEffort: set.minValuesBestEffort})
	if err != nil {
		return err
	}
	// the problem holds the pods as admission leaves them (a copy of a pod that admission changes): the objects
	// read are not needed any more, and at tens of thousands of pods they would double what the solve holds
	in.objects, preview.Objects = nil, nil
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		return err
	}
	devs, err := provision.DeviceObjectsOf(problem.ResourceClaims, problem.DeviceClasses)
	if err != nil {
		return err
	}
	res, err := provision.DryRun(ctx, provision.Request{Input: problem.Input(set.budget), Simulator: sim, Devices: &devs})
	if err != nil {
		return err
	}
	plan := res.Plan
	if plan.Improvement.TimedOut {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the improvement phase reached --solve-timeout %s after %d moves, before its bound: "+
			"this plan depends on the machine's speed (give a longer --solve-timeout)\n", set.budget, plan.Improvement.Moves)
	}
	out := renderPlan(plan, problem.Pods, problem.NodeClasses)
	out.Region, out.Currency = in.catalog.Region, currency(in.catalog)
	out.Commitments = billWithCommitments(problem, plan, in.catalog.Pricer())
	if len(preview.Replaced) > 0 {
		out.Karpenter = &planKarpenter{Nodes: len(preview.Replaced)}
		for _, r := range preview.Replaced {
			out.Karpenter.Pods += r.Pods
			out.Karpenter.TotalPrice += r.Price
			if r.Price == 0 {
				out.Karpenter.Unpriced = append(out.Karpenter.Unpriced, fmt.Sprintf("%s (%s %s in %s)", r.Name, r.InstanceType, r.CapacityType, r.Zone))
			}
		}
	}
	return writePlan(cmd.OutOrStdout(), out, set.output)
}

func renderPlan(plan *solver.Plan, pods []*corev1.Pod, classes map[string]*stevedorev1.EC2NodeClass) planOutput {
	out := planOutput{Nodes: []planNode{}, Existing: []planExisting{}, Unschedulable: []planUnschedulable{}, SolveSeconds: plan.Duration.Seconds()}
	var existing []string
	for node := range plan.InFlight {
		existing = append(existing, node)
	}
	sort.Strings(existing)
	for _, node := range existing {
		e := planExisting{Node: node}
		for _, p := range plan.InFlight[node] {
			e.Pods = append(e.Pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(e.Pods)
		out.Existing = append(out.Existing, e)
	}
	for i, n := range plan.NewNodes {
		pn := planNode{Name: fmt.Sprintf("node-%d", i+1), NodePool: n.NodePool.Name, InstanceType: n.InstanceType.Name,
			Zone: n.Offering.Zone, CapacityType: n.Offering.CapacityType, ReservationID: n.Offering.ReservationID,
			Commitment: commitmentOf(n.Offering), Price: n.Offering.ListPrice()}
		for _, name := range stevedorev1.AcceleratorResources() {
			if q, ok := n.InstanceType.Capacity[corev1.ResourceName(name)]; ok && !q.IsZero() {
				if pn.Accelerators == nil {
					pn.Accelerators = map[string]int64{}
				}
				pn.Accelerators[name] = q.Value()
			}
		}
		pn.Devices = nodeDevices(n.InstanceType, n.Pods)
		if ref := n.NodePool.Spec.Template.Spec.NodeClassRef; ref != nil && classes[ref.Name] != nil {
			pn.PlacementGroup = placementGroupOf(classes[ref.Name].Spec.PlacementGroupSelector)
		}
		for _, it := range n.InstanceTypes {
			pn.InstanceTypes = append(pn.InstanceTypes, it.Name)
		}
		for _, p := range n.Pods {
			pn.Pods = append(pn.Pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(pn.Pods)
		out.Nodes = append(out.Nodes, pn)
		out.TotalPrice += n.Offering.ListPrice()
	}
	for _, p := range pods {
		if reason, ok := plan.Unschedulable[p.UID]; ok {
			out.Unschedulable = append(out.Unschedulable, planUnschedulable{Pod: p.Namespace + "/" + p.Name, Reason: reason})
		}
	}
	return out
}

// placementGroupOf says which placement group a selector selects ("" for none).
func placementGroupOf(sel *stevedorev1.PlacementGroupSelector) string {
	switch {
	case sel == nil:
		return ""
	case sel.Name != "":
		return "name " + sel.Name
	case sel.ID != "":
		return "id " + sel.ID
	}
	tags := make([]string, 0, len(sel.Tags))
	for _, k := range slices.Sorted(maps.Keys(sel.Tags)) {
		tags = append(tags, k+"="+sel.Tags[k])
	}
	return "tags " + strings.Join(tags, ",")
}

// nodeDevices groups the devices a node of the type planned for the pods will publish by driver, product and memory
// (EFA devices when a pod asks for EFA interfaces: the node is launched with every one its type takes).
func nodeDevices(it *cloud.InstanceType, pods []*corev1.Pod) []planDevices {
	efa := 0
	for _, p := range pods {
		if q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[stevedorev1.ResourceEFA]; !q.IsZero() {
			q := it.Capacity[stevedorev1.ResourceEFA]
			efa = int(q.Value())
		}
	}
	var out []planDevices
	for _, slice := range devices.Slices("plan", it.Labels(), efa) {
		for _, d := range slice.Spec.Devices {
			pd := planDevices{Driver: slice.Spec.Driver}
			if a, ok := d.Attributes["productName"]; ok && a.StringValue != nil {
				pd.Product = *a.StringValue
			}
			if c, ok := d.Capacity["memory"]; ok {
				pd.Memory = c.Value.String()
			}
			if i := len(out) - 1; i >= 0 && out[i].Driver == pd.Driver && out[i].Product == pd.Product && out[i].Memory == pd.Memory {
				out[i].Count++
				continue
			}
			pd.Count = 1
			out = append(out, pd)
		}
	}
	return out
}

// commitmentOf names the Commitment an offering is covered by ("" when none is).
func commitmentOf(o cloud.Offering) string {
	if o.Covered == nil {
		return ""
	}
	return o.Covered.Commitment
}

// billWithCommitments prices the input's Nodes and the planned ones with the input's Commitments (nil without any).
func billWithCommitments(problem *solver.OfflineProblem, plan *solver.Plan, listed func(instanceType, zone, capacityType string) float64) *planCommitments {
	if len(problem.Coverage.Commitments) == 0 {
		return nil
	}
	var commitments []*commitment.Commitment
	for _, u := range problem.Coverage.Commitments {
		commitments = append(commitments, u.Commitment)
	}
	instances := commitment.NodeInstances(problem.Nodes, listed)
	for i, n := range plan.NewNodes {
		instances = append(instances, commitment.Instance{Name: fmt.Sprintf("node-%d", i+1), InstanceType: n.InstanceType.Name,
			Zone: n.Offering.Zone, CapacityType: n.Offering.CapacityType, ListPrice: n.Offering.ListPrice()})
	}
	cov := commitment.Cover(commitments, instances)
	return &planCommitments{Bill: cov.Bill(), Coverage: cov.Ratio(), ListPrice: cov.OnDemand + cov.Spot}
}

// planRow is a planned node's row of the table.
func planRow(n planNode) string {
	pods := strings.Join(n.Pods, ",")
	if len(n.Pods) > 4 {
		pods = strings.Join(n.Pods[:4], ",") + fmt.Sprintf(" and %d more", len(n.Pods)-4)
	}
	capacity := n.CapacityType
	if n.ReservationID != "" {
		capacity += " (" + n.ReservationID + ")"
	}
	if n.Commitment != "" {
		capacity += " (" + n.Commitment + ")"
	}
	var accelerators []string
	for _, name := range stevedorev1.AcceleratorResources() {
		if v, ok := n.Accelerators[name]; ok {
			accelerators = append(accelerators, fmt.Sprintf("%d %s", v, name))
		}
	}
	if len(accelerators) == 0 {
		accelerators = []string{"-"}
	}
	devs := []string{}
	for _, d := range n.Devices {
		devs = append(devs, fmt.Sprintf("%d %s %s (%s)", d.Count, d.Product, d.Memory, d.Driver))
	}
	if len(devs) == 0 {
		devs = []string{"-"}
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%s", n.Name, n.NodePool, n.InstanceType, n.Zone, capacity,
		strings.Join(accelerators, ","), strings.Join(devs, ","), n.Price, pods)
}

func printPlanTable(w io.Writer, out planOutput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODEPOOL\tTYPE\tZONE\tCAPACITY\tACCELERATORS\tDEVICES\tPRICE/H\tPODS")
	for _, n := range out.Nodes {
		fmt.Fprintln(tw, planRow(n))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d nodes, %s per hour, solved in %.3fs\n", len(out.Nodes), money(out.Currency, fmt.Sprintf("%.4f", out.TotalPrice)), out.SolveSeconds)
	if c := out.Commitments; c != nil {
		fmt.Fprintf(w, "with the Commitments, these nodes and the input's: %s per hour, their fees included (at list price %s; %.0f%% of the on-demand list price covered)\n",
			money(out.Currency, fmt.Sprintf("%.4f", c.Bill)), money(out.Currency, fmt.Sprintf("%.4f", c.ListPrice)), 100*c.Coverage)
	}
	if k := out.Karpenter; k != nil {
		fmt.Fprintf(w, "Karpenter's nodes now: %d nodes, %s per hour, for the %d pods planned here", k.Nodes, money(out.Currency, fmt.Sprintf("%.4f", k.TotalPrice)), k.Pods)
		if k.TotalPrice > 0 {
			fmt.Fprintf(w, " (the plan: %+.1f%%)", (out.TotalPrice-k.TotalPrice)/k.TotalPrice*100)
		}
		fmt.Fprintln(w)
		if len(k.Unpriced) > 0 {
			fmt.Fprintf(w, "not priced (not in the catalog): %s\n", strings.Join(k.Unpriced, ", "))
		}
	}
	for _, n := range out.Nodes {
		if n.PlacementGroup != "" {
			fmt.Fprintf(w, "%s launches into the placement group its EC2NodeClass selects: %s\n", n.Name, n.PlacementGroup)
		}
	}
	for _, e := range out.Existing {
		fmt.Fprintf(w, "on existing node %s: %s\n", e.Node, strings.Join(e.Pods, ","))
	}
	for _, u := range out.Unschedulable {
		fmt.Fprintf(w, "unschedulable %s: %s\n", u.Pod, u.Reason)
	}
	return nil
}
