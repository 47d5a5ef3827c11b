/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package quiet checks that Stevedore's controllers reach a fixed point: a healthy cluster at rest, and
// EC2NodeClasses that cannot resolve, cost a bounded number of AWS calls and object writes a minute, instead of a
// loop in which every status write wakes the next reconcile.
package quiet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 500 * time.Millisecond},
		func(s *sandbox.Sandbox) { sb = s })
}

// window is how long the calls and writes are counted.
const window = time.Minute

// writes counts updates of Stevedore's objects by kind/name while it runs.
type writes struct {
	mu     sync.Mutex
	counts map[string]int
}

func watchWrites(t *testing.T) *writes {
	w := &writes{counts: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := externalversions.NewSharedInformerFactory(sb.Stevedore, 0)
	count := func(kind string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
			o, n := old.(metav1.Object), obj.(metav1.Object)
			if o.GetResourceVersion() == n.GetResourceVersion() {
				return // a resync, not a write
			}
			w.mu.Lock()
			w.counts[kind+"/"+n.GetName()]++
			w.mu.Unlock()
		}}
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{
		"EC2NodeClass": f.Stevedore().V1().EC2NodeClasses().Informer(),
		"NodePool":     f.Stevedore().V1().NodePools().Informer(),
		"NodeClaim":    f.Stevedore().V1().NodeClaims().Informer(),
	} {
		if _, err := inf.AddEventHandler(count(kind)); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

func (w *writes) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.counts
	w.counts = map[string]int{}
	return out
}

// during counts the AWS calls and object writes of window.
func during(t *testing.T, w *writes) (calls, written map[string]int) {
	t.Helper()
	before := sb.AWS.Calls()
	w.take()
	time.Sleep(window) // the measurement window itself, not synchronisation: nothing is awaited
	after := sb.AWS.Calls()
	calls = map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			calls[k] = d
		}
	}
	return calls, w.take()
}

func format(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// TestAQuietClusterAndBrokenNodeClassesReachAFixedPoint: a cluster with a healthy EC2NodeClass and a NodePool
// with one node, at rest, then the same with one EC2NodeClass of each broken kind (an SSM parameter that does not
// exist, no subnet, no security group, no AMI, a role that does not exist, an instance profile that does not), each with a NodePool and a pending pod that needs it. Over a
// minute each: at most the resync's calls (one resolution a minute per node class and the instance checks), no
// write for a status that did not change, and for a broken node class at most two resolutions (the resync and one
// retry after its 30 s backoff) however many pods wait on it.
func TestAQuietClusterAndBrokenNodeClassesReachAFixedPoint(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	w := watchWrites(t)

	harness.NodePool(t, sb, "healthy", "healthy")
	pods, names := harness.Pods(ns, "healthy", "web", 1, "500m", "256Mi")
	harness.CreatePods(t, sb, pods...)
	harness.WaitBound(t, sb, ns, names)
	harness.Eventually(t, "the healthy NodePool's node initialized and its status settled", func(ctx context.Context) (bool, error) {
		claims := harness.LiveNodeClaimsOf(t, sb, "healthy")
		return len(claims) == 1 && meta.IsStatusConditionTrue(claims[0].Status.Conditions, stevedorev1.ConditionInitialized), nil
	})
	// settle: the launch's own writes (NodeClaim conditions, NodePool status) end within seconds
	settled := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return len(w.take()) == 0, nil
	})
	if settled != nil {
		t.Fatal("Stevedore's objects were still being written two minutes after the node came up")
	}
	calls, written := during(t, w)
	t.Logf("a healthy cluster at rest, one minute: AWS calls %s; writes %s", format(calls), format(written))
	idleBudget := map[string]int{
		// the resync: one resolution of the node class a minute, two when the window straddles them (subnets,
		// security groups, images, and the five parameters of the al2023@latest alias: standard, NVIDIA and Neuron
		// images by architecture), and the garbage collector's instance listing
		"EC2.DescribeSubnets": 2, "EC2.DescribeSecurityGroups": 2, "EC2.DescribeImages": 2, "AmazonSSM.GetParameter": 2 * 5,
		"EC2.DescribeInstances": 4,
	}
	total := 0
	for call, n := range calls {
		total += n
		if strings.HasPrefix(call, "IAM.") {
			t.Errorf("at rest, %s was called %d times: an instance profile seen ready is not asked about again", call, n)
		}
		if budget, ok := idleBudget[call]; ok && n > budget {
			t.Errorf("at rest, %s was called %d times in a minute, budget %d", call, n, budget)
		}
	}
	if total > 30 {
		t.Errorf("at rest, %d AWS calls in a minute (budget 30): %s", total, format(calls))
	}
	for obj, n := range written {
		if n > 1 {
			t.Errorf("at rest, %s was written %d times in a minute, want at most 1", obj, n)
		}
	}

	broken := map[string]func(*stevedorev1.EC2NodeClass){
		"missing-ssm-parameter": func(nc *stevedorev1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []stevedorev1.AMISelectorTerm{{SSMParameter: "/stevedore/test/no-such-parameter"}}
		},
		"no-subnet": func(nc *stevedorev1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"no-such-tag": "x"}}}
		},
		"no-security-group": func(nc *stevedorev1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"no-such-tag": "x"}}}
		},
		"no-ami": func(nc *stevedorev1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []stevedorev1.AMISelectorTerm{{Name: "no-such-image-*"}}
		},
		"unknown-role": func(nc *stevedorev1.EC2NodeClass) { nc.Spec.Role = "NoSuchRole" },
		"unknown-instance-profile": func(nc *stevedorev1.EC2NodeClass) {
			nc.Spec.Role, nc.Spec.InstanceProfile = "", new("NoSuchInstanceProfile")
		},
	}
	kinds := slices.Sorted(maps.Keys(broken))
	for _, kind := range kinds {
		nc := harness.NewNodeClass()
		nc.Name = kind
		broken[kind](nc)
		if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), kind, metav1.DeleteOptions{})
		})
		harness.NodePool(t, sb, kind, kind, func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = kind })
		pods, _ := harness.Pods(ns, kind, kind, 2, "500m", "256Mi")
		harness.CreatePods(t, sb, pods...)
	}
	for _, kind := range kinds {
		harness.Eventually(t, "EC2NodeClass "+kind+" not Ready, saying why", func(ctx context.Context) (bool, error) {
			nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, kind, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(nc.Status.Conditions, stevedorev1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Message != "", nil
		})
	}
	calls, written = during(t, w)
	t.Logf("%d broken EC2NodeClasses with pods waiting, one minute: AWS calls %s; writes %s", len(kinds), format(calls), format(written))
	n := len(kinds) + 1 // and the healthy one
	brokenBudget := map[string]int{
		"EC2.DescribeSubnets": 2 * n, "EC2.DescribeSecurityGroups": 2 * n, "EC2.DescribeImages": 2 * n, "AmazonSSM.GetParameter": 2 * 5 * n,
		// the unknown role and the unknown profile: one look a resolution; the role's profile was created before
		"IAM.GetInstanceProfile": 2 * 2, "IAM.AddRoleToInstanceProfile": 2, "IAM.CreateInstanceProfile": 0,
	}
	for call, budget := range brokenBudget {
		if calls[call] > budget {
			t.Errorf("with %d broken node classes, %s was called %d times in a minute, budget %d", len(kinds), call, calls[call], budget)
		}
	}
	for obj, c := range written {
		if c > 1 {
			t.Errorf("%s was written %d times in a minute, want at most 1 (a status that does not change is not written)", obj, c)
		}
	}
	for _, kind := range kinds {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, kind, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, stevedorev1.ConditionReady)
		if strings.Contains(strings.ToLower(c.Message), "requestid") || strings.Contains(strings.ToLower(c.Message), "request id") {
			t.Errorf("EC2NodeClass %s: the Ready message carries a per-call request ID: %s", kind, c.Message)
		}
		t.Logf("EC2NodeClass %s: %s: %s", kind, c.Reason, c.Message)
	}
	pending, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var unbound []string
	for _, p := range pending.Items {
		if p.Spec.NodeName == "" {
			unbound = append(unbound, p.Name)
		}
	}
	sort.Strings(unbound)
	if len(unbound) != 2*len(kinds) {
		t.Errorf("pods waiting on broken node classes: %v, want the %d of them", unbound, 2*len(kinds))
	}
}
