/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// cluster reaches a sandbox run as its own process: its API server through the admin kubeconfig, its emulated EC2
// through the endpoint and credentials of its --env-out file, with the SDK, as the scheduler does.
type cluster struct {
	kube      kubernetes.Interface
	stevedore versioned.Interface
	ec2       *ec2.Client
	env       []string
	name      string
}

func connect(t *testing.T, kubeconfig, envFile string) *cluster {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	env := readEnvFile(t, envFile)
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	// the sandbox runs without Stevedore: install its CRDs and policy as a user would before starting the binary
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sandbox.InstallStevedore(ctx, rc); err != nil {
		t.Fatalf("installing Stevedore's CRDs and policy: %v", err)
	}
	cfg := aws.Config{Region: vars["AWS_REGION"],
		Credentials: credentials.NewStaticCredentialsProvider(vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], "")}
	return &cluster{
		kube:      kubernetes.NewForConfigOrDie(rc),
		stevedore: versioned.NewForConfigOrDie(rc),
		ec2:       ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(vars["AWS_ENDPOINT_URL_EC2"]) }),
		env:       env,
		name:      vars["STEVEDORE_CLUSTER_NAME"],
	}
}

// schedulerConfig writes the production scheduler configuration with edits applied to its decoded form.
func schedulerConfig(t *testing.T, dir, name string, edit func(config map[string]any, args map[string]any)) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var config map[string]any
	if err := yaml.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	profile := config["profiles"].([]any)[0].(map[string]any)
	args := profile["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
	edit(config, args)
	out, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	writeFile(t, path, string(out))
	return path
}

// isolatedWorkload creates the EC2NodeClass "default", an isolated NodePool and an empty Deployment "app" of pods
// requesting cpu and twice as many GiB as CPUs, that only the NodePool's nodes take, in a new namespace.
func (c *cluster) isolatedWorkload(t *testing.T, pool, cpu string, mutate func(*stevedorev1.NodePool)) (ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, harness.NewNodeClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.stevedore.StevedoreV1().NodePools().Create(ctx, harness.NewNodePool(pool, pool, mutate), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns = pool
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse(cpu)
	d := harness.Deployment(ns, "app", 0, cpu, fmt.Sprintf("%dMi", q.MilliValue()*2048/1000))
	d.Spec.Template.Spec = harness.Isolated(&corev1.Pod{Spec: d.Spec.Template.Spec}, pool).Spec
	if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func (c *cluster) scale(t *testing.T, ns string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.kube.AppsV1().Deployments(ns).Patch(context.Background(), "app", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// watchClaims watches the NodePool's NodeClaims until one satisfies cond, and returns "" then, or why not when
// the timeout passes. A watch sees every state a NodeClaim passes through, where polling may miss a short one.
func (c *cluster) watchClaims(ctx context.Context, pool string, timeout time.Duration, cond func(*stevedorev1.NodeClaim) bool) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	selector := stevedorev1.LabelNodePool + "=" + pool
	claims := c.stevedore.StevedoreV1().NodeClaims()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return claims.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return claims.Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &stevedorev1.NodeClaim{}, nil, func(ev watch.Event) (bool, error) {
		claim, ok := ev.Object.(*stevedorev1.NodeClaim)
		return ok && cond(claim), nil
	})
	if err != nil {
		return err.Error()
	}
	return ""
}

// snapshot is what the invariants are checked on: the workload's pods, the NodePool's NodeClaims and nodes, and
// the cluster's instances in the emulated EC2 (every state, terminated ones included).
type snapshot struct {
	pods      []corev1.Pod
	claims    []stevedorev1.NodeClaim
	instances []ec2types.Instance
}

func (c *cluster) snapshot(ctx context.Context, ns, pool string) (*snapshot, error) {
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := c.stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{LabelSelector: stevedorev1.LabelNodePool + "=" + pool})
	if err != nil {
		return nil, err
	}
	s := &snapshot{pods: pods.Items, claims: claims.Items}
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + awscloud.OwnershipTag(c.name)), Values: []string{"owned"}},
		{Name: aws.String("tag:" + stevedorev1.LabelNodePool), Values: []string{pool}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			s.instances = append(s.instances, r.Instances...)
		}
	}
	return s, nil
}

// live returns the pods not being deleted.
func (s *snapshot) live() []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// unsettled says why the workload is not settled yet, or "" when it is: replicas pods Running on nodes, no
// NodeClaim being deleted or not yet initialized, every NodeClaim's node hosting a pod, and the running instances
// exactly the NodeClaims' instances.
func (s *snapshot) unsettled(replicas int) string {
	live := s.live()
	running := s.running()
	if len(live) != replicas || running != replicas {
		return fmt.Sprintf("%d of %d pods Running (%d exist)", running, replicas, len(live))
	}
	hosts := map[string]int{}
	for _, p := range live {
		hosts[p.Spec.NodeName]++
	}
	for _, c := range s.claims {
		switch {
		case c.DeletionTimestamp != nil:
			return "NodeClaim " + c.Name + " is being deleted"
		case !c.IsInitialized():
			return "NodeClaim " + c.Name + " is not initialized"
		case hosts[c.Status.NodeName] == 0:
			return "NodeClaim " + c.Name + " hosts none of the pods"
		}
	}
	if leaked := s.leaked(); len(leaked) > 0 {
		return "instances without a NodeClaim: " + strings.Join(leaked, ",")
	}
	return ""
}

// running counts the live pods Running on a node.
func (s *snapshot) running() int {
	n := 0
	for _, p := range s.live() {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// leaked returns the running or pending instances that no live NodeClaim names, and the NodeClaims whose
// instance is not running.
func (s *snapshot) leaked() []string {
	claimed := map[string]bool{}
	for _, c := range s.claims {
		if c.Status.InstanceID != "" && c.DeletionTimestamp == nil {
			claimed[c.Status.InstanceID] = true
		}
	}
	var out []string
	for _, inst := range s.instances {
		id := aws.ToString(inst.InstanceId)
		if state := inst.State.Name; (state == ec2types.InstanceStateNameRunning || state == ec2types.InstanceStateNamePending) && !claimed[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// duplicates returns the NodeClaims more than one instance was launched for, over the whole history of the
// emulated EC2.
func (s *snapshot) duplicates() []string {
	perClaim := map[string]int{}
	for _, inst := range s.instances {
		for _, tag := range inst.Tags {
			if aws.ToString(tag.Key) == awscloud.TagNodeClaim {
				perClaim[aws.ToString(tag.Value)]++
			}
		}
	}
	var out []string
	for claim, n := range perClaim {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%d instances)", claim, n))
		}
	}
	sort.Strings(out)
	return out
}

// untagged counts the instances launched whose NodeClaim tag was never written: the process died between
// CreateFleet and CreateTags; garbage collection terminates them.
func (s *snapshot) untagged() int {
	n := 0
	for _, inst := range s.instances {
		found := false
		for _, tag := range inst.Tags {
			found = found || aws.ToString(tag.Key) == awscloud.TagNodeClaim
		}
		if !found {
			n++
		}
	}
	return n
}

// idle returns the live NodeClaims whose node hosts none of the workload's pods, but for consolidation's
// replacements, which take their pods only when the nodes they replace drain.
func (s *snapshot) idle() []string {
	hosts := map[string]bool{}
	for _, p := range s.live() {
		hosts[p.Spec.NodeName] = true
	}
	var out []string
	for _, c := range s.claims {
		if _, replacement := c.Annotations[disruption.AnnotationReplaces]; c.DeletionTimestamp == nil && !replacement && !hosts[c.Status.NodeName] {
			out = append(out, c.Name)
		}
	}
	return out
}

// idleWhenBound waits up to three minutes until the workload's replicas pods all have a node, and returns the
// NodeClaims that then host none of them: a node launched again for pods that meanwhile bound elsewhere shows
// here, before consolidation would remove it.
func (c *cluster) idleWhenBound(ctx context.Context, ns, pool string, replicas int) []string {
	var idle []string
	_ = waitFor(ctx, 3*time.Minute, func(ctx context.Context) string {
		s, err := c.snapshot(ctx, ns, pool)
		if err != nil {
			return err.Error()
		}
		for _, p := range s.live() {
			if p.Spec.NodeName == "" {
				return "pending pods"
			}
		}
		if len(s.live()) != replicas {
			return "pods missing"
		}
		idle = s.idle()
		return ""
	})
	return idle
}

// settle waits up to four minutes for the workload to settle (see unsettled) and returns the last snapshot and
// why it is not settled, "" when it is.
func (c *cluster) settle(ctx context.Context, ns, pool string, replicas int) (*snapshot, string) {
	var last *snapshot
	why := waitFor(ctx, 4*time.Minute, func(ctx context.Context) string {
		s, err := c.snapshot(ctx, ns, pool)
		if err != nil {
			return err.Error()
		}
		last = s
		return s.unsettled(replicas)
	})
	return last, why
}

// waitFor polls cond every 200ms until it returns "" or timeout passes, and returns the last reason.
func waitFor(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) string) string {
	deadline := time.Now().Add(timeout)
	for {
		why := cond(ctx)
		if why == "" || time.Now().After(deadline) {
			return why
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
}
