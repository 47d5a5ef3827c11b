/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/manifests"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// inflateDeployment is the Deployment of manifests/examples/inflate.yaml.
const inflateDeployment = "inflate"

// inflateScenario replays the user's proof of concept and tells its story: the production NodePools (arm64 spot,
// amd64 spot, on-demand critical) and their node classes are applied, the inflate Deployment (pause, 1 CPU per
// replica) is scaled from 0 to 10 (every launch is printed), then to 4 and to 0 (every removal is printed) while a
// progress line shows pending pods, nodes launching and ready, and the hourly cost; a summary table ends it, its
// last row checked against the cluster.
func inflateScenario(ctx context.Context, sb *Sandbox, out io.Writer) error {
	p := newProgress(out)
	if err := applyExamples(ctx, sb, "ec2nodeclasses.yaml", "production.yaml", "inflate.yaml"); err != nil {
		return err
	}
	p.step("applied manifests/examples: EC2NodeClasses arm64, amd64, on-demand; NodePools arm64-spot (weight 100), amd64-spot (50), on-demand-critical (10); Deployment inflate (0 replicas)")
	// The examples wait 5-10 minutes before consolidating, with budgets of 5% or 1 node: right for production, long
	// for a demo.
	for _, name := range []string{"arm64-spot", "amd64-spot", "on-demand-critical"} {
		if err := quickDisruption(ctx, sb, name); err != nil {
			return err
		}
	}
	p.step("demo setting: NodePools consolidateAfter 10s and budget 100%% (the examples say 5m/10m and 5%%/1 node)")
	var rows []summaryRow
	for _, phase := range []struct {
		replicas int32
		what     string
		timeout  time.Duration
	}{
		{10, "scale-up", 3 * time.Minute},
		{4, "scale-down (empty nodes removed)", 4 * time.Minute},
		{0, "scale to 0 (all nodes removed)", 4 * time.Minute},
	} {
		row, err := inflatePhase(ctx, sb, p, phase.replicas, phase.what, phase.timeout)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	final, err := observe(ctx, sb)
	if err != nil {
		return err
	}
	if final.ready != 0 || final.cost != 0 || final.running != 0 {
		return fmt.Errorf("the summary says the fleet is empty but the cluster has %s", final)
	}
	printSummary(out, rows)
	return nil
}

type summaryRow struct {
	phase string
	took  time.Duration
	state fleetState
}

// inflatePhase scales the inflate Deployment to replicas and waits until the fleet settles, showing progress.
func inflatePhase(ctx context.Context, sb *Sandbox, p *progress, replicas int32, what string, timeout time.Duration) (summaryRow, error) {
	if err := scale(ctx, sb, inflateDeployment, replicas); err != nil {
		return summaryRow{}, err
	}
	p.step("kubectl scale deployment inflate --replicas %d", replicas)
	start := time.Now()
	var last fleetState
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		st, err := observe(ctx, sb)
		if err != nil {
			return false, err
		}
		p.show(st)
		last = st
		// settled: every replica runs, nothing launches or goes, and (after a scale-down) one node per pod
		settled := st.running == int(replicas) && st.pending == 0 && st.launching == 0 && st.deleting == 0
		if replicas < 10 {
			settled = settled && st.ready == int(replicas)
		}
		return settled, nil
	})
	p.done()
	if err != nil {
		return summaryRow{}, fmt.Errorf("%s did not settle within %s (last: %s): %w", what, timeout, last, err)
	}
	p.step("%s done in %.1fs: %d pods Running on %d nodes, $%.4f/h", what, time.Since(start).Seconds(), last.running, last.ready, last.cost)
	return summaryRow{phase: what, took: time.Since(start), state: last}, nil
}

// printSummary writes the scenario's summary table, and the slowest waits for a ready node.
func printSummary(out io.Writer, rows []summaryRow) {
	fmt.Fprintf(out, "\n%-34s %8s %6s %6s %10s\n", "phase", "took", "pods", "nodes", "cost/h")
	for _, r := range rows {
		fmt.Fprintf(out, "%-34s %7.1fs %6d %6d %10s\n", r.phase, r.took.Seconds(), r.state.running, r.state.ready, fmt.Sprintf("$%.4f", r.state.cost))
	}
	if line := waitsLine(); line != "" {
		fmt.Fprintf(out, "\n%s\n", line)
	}
	fmt.Fprintln(out)
}

// quickDisruption shortens a NodePool's consolidateAfter to 10s and its budget to 100%.
func quickDisruption(ctx context.Context, sb *Sandbox, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NewDuration(10 * time.Second)
		np.Spec.Disruption.Budgets = []stevedorev1.Budget{{Nodes: "100%"}}
		_, err = sb.Stevedore.StevedoreV1().NodePools().Update(ctx, np, metav1.UpdateOptions{})
		return err
	})
}

// fleetState is what the progress line shows.
type fleetState struct {
	pending, running           int
	launching, ready, deleting int
	cost                       float64
	launched, removed          []string
}

func (f fleetState) String() string {
	return fmt.Sprintf("pods pending %d, running %d | nodes launching %d, ready %d, going %d | $%.4f/h",
		f.pending, f.running, f.launching, f.ready, f.deleting, f.cost)
}

// observe reads the inflate pods and the NodeClaims.
func observe(ctx context.Context, sb *Sandbox) (fleetState, error) {
	var st fleetState
	pods, err := sb.Kube.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
	if err != nil {
		return st, err
	}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			st.running++
		default:
			st.pending++
		}
	}
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, err
	}
	sort.Slice(claims.Items, func(i, j int) bool { return claims.Items[i].Name < claims.Items[j].Name })
	for _, c := range claims.Items {
		switch {
		case c.DeletionTimestamp != nil:
			st.deleting++
			st.removed = append(st.removed, fmt.Sprintf("%s (%s, %s, %s)", c.Status.NodeName, c.Status.InstanceType, c.Status.CapacityType,
				firstNonEmptyString(c.Status.DisruptionReason, "deleted")))
			continue
		case initialized(&c):
			st.ready++
		default:
			st.launching++
		}
		price, _ := strconv.ParseFloat(c.Status.Price, 64) // absent before launch: 0
		st.cost += price
		if c.Status.InstanceID != "" {
			st.launched = append(st.launched, fmt.Sprintf("Launched instance: %s, hostname: %s, type: %s, zone: %s, capacityType: %s, price: $%s/h, nodepool: %s",
				c.Status.InstanceID, c.Status.NodeName, c.Status.InstanceType, c.Status.Zone, c.Status.CapacityType,
				c.Status.Price, c.Labels[stevedorev1.LabelNodePool]))
		}
	}
	return st, nil
}

func initialized(c *stevedorev1.NodeClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

func firstNonEmptyString(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// progress prints the scenario's story: timestamped steps, each launch and removal once, and a progress line
// that a terminal rewrites in place and any other output gets once per change.
type progress struct {
	out      io.Writer
	tty      bool
	begin    time.Time
	line     string
	open     bool
	launched map[string]bool
	removed  map[string]bool
}

func newProgress(out io.Writer) *progress {
	p := &progress{out: out, begin: time.Now(), launched: map[string]bool{}, removed: map[string]bool{}}
	if f, ok := out.(*os.File); ok {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *progress) step(format string, args ...any) {
	p.done()
	fmt.Fprintf(p.out, "[%5.1fs] %s\n", time.Since(p.begin).Seconds(), fmt.Sprintf(format, args...))
}

// show prints new launches and removals, then the progress line if it changed.
func (p *progress) show(st fleetState) {
	for _, l := range st.launched {
		if !p.launched[l] {
			p.launched[l] = true
			p.step("%s", l)
		}
	}
	for _, r := range st.removed {
		if !p.removed[r] {
			p.removed[r] = true
			p.step("Removing node %s", r)
		}
	}
	line := st.String()
	if line == p.line && (p.open || !p.tty) {
		return
	}
	p.line = line
	if p.tty {
		fmt.Fprintf(p.out, "\r\033[K[%5.1fs] %s", time.Since(p.begin).Seconds(), line)
		p.open = true
		return
	}
	fmt.Fprintf(p.out, "[%5.1fs]   %s\n", time.Since(p.begin).Seconds(), line)
}

// done ends a progress line a terminal was rewriting.
func (p *progress) done() {
	if p.open {
		fmt.Fprintln(p.out)
		p.open = false
	}
}

// applyExamples creates (or updates) the objects of files in manifests/examples.
func applyExamples(ctx context.Context, sb *Sandbox, files ...string) error {
	dec := manifest.NewDecoder()
	for _, f := range files {
		raw, err := fs.ReadFile(manifests.Examples, "examples/"+f)
		if err != nil {
			return err
		}
		objs, err := dec.Decode(strings.NewReader(string(raw)))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, obj := range objs {
			if err := sb.Apply(ctx, obj); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return nil
}

// Apply creates an object of a kind the sandbox knows (NodePool, EC2NodeClass, Deployment), or updates it.
func (s *Sandbox) Apply(ctx context.Context, obj any) error {
	var err error
	switch o := obj.(type) {
	case *stevedorev1.NodePool:
		_, err = s.Stevedore.StevedoreV1().NodePools().Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Stevedore writes the NodePool's status: retry on conflict with the latest version
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, gerr := s.Stevedore.StevedoreV1().NodePools().Get(ctx, o.Name, metav1.GetOptions{})
				if gerr != nil {
					return gerr
				}
				o.ResourceVersion = cur.ResourceVersion
				_, uerr := s.Stevedore.StevedoreV1().NodePools().Update(ctx, o, metav1.UpdateOptions{})
				return uerr
			})
		}
	case *stevedorev1.EC2NodeClass:
		_, err = s.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Stevedore writes the node class's status: retry on conflict with the latest version
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, gerr := s.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, o.Name, metav1.GetOptions{})
				if gerr != nil {
					return gerr
				}
				o.ResourceVersion = cur.ResourceVersion
				_, uerr := s.Stevedore.StevedoreV1().EC2NodeClasses().Update(ctx, o, metav1.UpdateOptions{})
				return uerr
			})
		}
	case *appsv1.Deployment:
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		_, err = s.Kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *corev1.Pod:
		_, err = s.Kube.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("the sandbox cannot apply %T", obj)
	}
	return err
}

func scale(ctx context.Context, sb *Sandbox, name string, replicas int32) error {
	// the Deployment controller writes the Deployment's status: read-modify-write until the write lands
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := sb.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(replicas)
		_, err = sb.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}
