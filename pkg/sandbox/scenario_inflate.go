package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/manifests"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// inflateScenario replays the user's proof of concept: the production NodePools (arm64 spot, amd64 spot,
// on-demand critical) and their node classes are applied, the inflate Deployment (pause, 1 CPU per replica) is
// scaled from 0 to 10, every launch is printed as it happens, and it is scaled back to 0.
func inflateScenario(ctx context.Context, sb *Sandbox, out io.Writer) error {
	begin := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := applyExamples(ctx, sb, "ec2nodeclasses.yaml", "production.yaml", "inflate.yaml"); err != nil {
		return err
	}
	step("applied manifests/examples: EC2NodeClasses arm64, amd64, on-demand; NodePools arm64-spot (weight 100), amd64-spot (50), on-demand-critical (10); Deployment inflate (0 replicas)")
	if err := scale(ctx, sb, "inflate", 10); err != nil {
		return err
	}
	step("kubectl scale deployment inflate --replicas 10")
	seen := map[string]bool{}
	printLaunches := func() {
		claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		sort.Slice(claims.Items, func(i, j int) bool { return claims.Items[i].Name < claims.Items[j].Name })
		for _, c := range claims.Items {
			if c.Status.InstanceID == "" || seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			step("Launched instance: %s, hostname: %s, type: %s, zone: %s, capacityType: %s, price: $%s/h, nodepool: %s",
				c.Status.InstanceID, c.Status.NodeName, c.Status.InstanceType, c.Status.Zone, c.Status.CapacityType,
				c.Status.Price, c.Labels[stevedorev1.LabelNodePool])
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		printLaunches()
		d, err := sb.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, "inflate", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 10, nil
	})
	if err != nil {
		return fmt.Errorf("inflate never had 10 available replicas: %w", err)
	}
	printLaunches()
	pods, err := sb.Kube.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
	if err != nil {
		return err
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}
	cost, nodes := fleetCost(ctx, sb)
	step("10/10 inflate pods Running on %d new nodes, $%.4f per hour", nodes, cost)
	for _, n := range sortedKeysInt(perNode) {
		step("  %s: %d pods", n, perNode[n])
	}
	if err := scale(ctx, sb, "inflate", 0); err != nil {
		return err
	}
	step("kubectl scale deployment inflate --replicas 0")
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := sb.Kube.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		return err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		return fmt.Errorf("inflate pods did not go away: %w", err)
	}
	step("inflate scaled to 0; the empty nodes stay until disruption removes them")
	return nil
}

// fleetCost sums the hourly price of the NodeClaims.
func fleetCost(ctx context.Context, sb *Sandbox) (float64, int) {
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0
	}
	total := 0.0
	for _, c := range claims.Items {
		var v float64
		fmt.Sscanf(c.Status.Price, "%g", &v)
		total += v
	}
	return total, len(claims.Items)
}

func sortedKeysInt(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
func (sb *Sandbox) Apply(ctx context.Context, obj any) error {
	var err error
	switch o := obj.(type) {
	case *stevedorev1.NodePool:
		_, err = sb.Stevedore.StevedoreV1().NodePools().Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, o.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			o.ResourceVersion = cur.ResourceVersion
			_, err = sb.Stevedore.StevedoreV1().NodePools().Update(ctx, o, metav1.UpdateOptions{})
		}
	case *stevedorev1.EC2NodeClass:
		_, err = sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, o.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			o.ResourceVersion = cur.ResourceVersion
			_, err = sb.Stevedore.StevedoreV1().EC2NodeClasses().Update(ctx, o, metav1.UpdateOptions{})
		}
	case *appsv1.Deployment:
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		_, err = sb.Kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *corev1.Pod:
		_, err = sb.Kube.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("the sandbox cannot apply %T", obj)
	}
	return err
}

func scale(ctx context.Context, sb *Sandbox, name string, replicas int32) error {
	d, err := sb.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Replicas = ptr.To(replicas)
	_, err = sb.Kube.AppsV1().Deployments(metav1.NamespaceDefault).Update(ctx, d, metav1.UpdateOptions{})
	return err
}
