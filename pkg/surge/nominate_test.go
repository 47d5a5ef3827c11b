/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// activations records the pods put back in the scheduling queue.
type activations struct {
	mu   sync.Mutex
	pods map[string]int
}

func (a *activations) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range pods {
		a.pods[key]++
	}
}

func (a *activations) count(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods[key]
}

func successor(name string, uid types.UID, rs *appsv1.ReplicaSet) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
		OwnerReferences: []metav1.OwnerReference{controllerRef("ReplicaSet", rs.Name, rs.UID)}}}
}

func nominationsOf(t *testing.T, pods ...runtime.Object) (*Nominations, *fake.Clientset, *activations) {
	t.Helper()
	client := fake.NewClientset(pods...)
	queue := &activations{pods: map[string]int{}}
	return NewNominations(NominationOptions{Kube: client, Queue: queue, Interval: time.Millisecond, Timeout: 10 * time.Second}), client, queue
}

// nominated waits until the API server shows the pod nominated, and returns the node.
func nominated(ctx context.Context, t *testing.T, client *fake.Clientset, pod *corev1.Pod) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = cur.Status.NominatedNodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s was not nominated: %v", pod.Name, err)
	}
	return node
}

// TestSuccessorsAreNominatedToThePlannedNodes: a surge expects two successors on nodes b and a; each new pod of
// its ReplicaSet is held until the scheduler's copy shows its nomination (one node each, in name order), is put
// back in the queue meanwhile, then passes; a third pod finds no node left and passes at once.
func TestSuccessorsAreNominatedToThePlannedNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rs := newWorld().replicaSet
	first, second, third := successor("s1", "u1", rs), successor("s2", "u2", rs), successor("s3", "u3", rs)
	n, client, queue := nominationsOf(t, first, second, third)
	n.Expect(rs, []string{"b", "", "a"})

	for _, tc := range []struct {
		pod  *corev1.Pod
		node string
	}{{first, "a"}, {second, "b"}} {
		if why := n.Hold(ctx, tc.pod); !strings.Contains(why, "node "+tc.node) {
			t.Fatalf("Hold(%s) = %q; want it held for node %s", tc.pod.Name, why, tc.node)
		}
		if got := nominated(ctx, t, client, tc.pod); got != tc.node {
			t.Errorf("pod %s nominated to %s, want %s", tc.pod.Name, got, tc.node)
		}
		// the queue's copy has not seen the nomination yet: still held
		if why := n.Hold(ctx, tc.pod); why == "" {
			t.Errorf("Hold(%s) passes before the scheduler's copy shows the nomination", tc.pod.Name)
		}
		// once the write is answered, the pod is put back in the queue until it passes; its nomination seen, it does
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return queue.count("ns/"+tc.pod.Name) > 0, nil
		})
		if err != nil {
			t.Errorf("pod %s was never put back in the scheduling queue", tc.pod.Name)
		}
		seen := tc.pod.DeepCopy()
		seen.Status.NominatedNodeName = tc.node
		if why := n.Hold(ctx, seen); why != "" {
			t.Errorf("Hold(%s) with its nomination = %q, want it to pass", tc.pod.Name, why)
		}
	}
	if why := n.Hold(ctx, third); why != "" {
		t.Errorf("Hold(%s) = %q; no planned node is left, it should pass", third.Name, why)
	}
	n.Forget(rs)
	if len(n.successors) != 0 || len(n.expected) != 0 {
		t.Errorf("after Forget: %d successors and %d expectations kept, want none", len(n.successors), len(n.expected))
	}
}

// TestPodsNoSurgeExpectsAreNotHeld: pods bound, being deleted, of another ReplicaSet, of no owner or nominated by
// someone else pass at once and are not nominated.
func TestPodsNoSurgeExpectsAreNotHeld(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rs := newWorld().replicaSet
	other := rs.DeepCopy()
	other.UID, other.Name = "other-uid", "other"
	bound := successor("bound", "u1", rs)
	bound.Spec.NodeName = "x"
	deleting := successor("deleting", "u2", rs)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	nominatedElsewhere := successor("preempting", "u3", rs)
	nominatedElsewhere.Status.NominatedNodeName = "y"
	orphan := successor("orphan", "u4", rs)
	orphan.OwnerReferences = nil
	pods := []*corev1.Pod{bound, deleting, nominatedElsewhere, orphan, successor("other", "u5", other)}
	n, _, _ := nominationsOf(t)
	n.Expect(rs, []string{"a"})
	for _, pod := range pods {
		if why := n.Hold(ctx, pod); why != "" {
			t.Errorf("Hold(%s) = %q, want it to pass", pod.Name, why)
		}
	}
	if got := n.expected[rs.UID]; len(got) != 1 {
		t.Errorf("the planned node was given away: %v left, want [a]", got)
	}
	var none *Nominations
	none.Expect(rs, []string{"a"})
	none.Forget(rs)
	if why := none.Hold(ctx, successor("s", "u6", rs)); why != "" {
		t.Errorf("nil Nominations hold a pod: %q", why)
	}
}

// TestASuccessorIsReleasedWhenItsNominationFails: a nomination the API server refuses, one the scheduler's copy
// never shows within the timeout, and one whose surge ended while it waited each let the pod be scheduled as any
// other (the pod is put back in the queue to be tried).
func TestASuccessorIsReleasedWhenItsNominationFails(t *testing.T) {
	cases := []struct {
		name   string
		refuse bool
		forget bool
	}{
		{name: "the API server refuses the nomination", refuse: true},
		{name: "the nomination is never seen"},
		{name: "the surge ends meanwhile", forget: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			rs := newWorld().replicaSet
			pod := successor("s1", "u1", rs)
			n, client, queue := nominationsOf(t, pod)
			n.opts.Timeout = 50 * time.Millisecond
			if tc.refuse {
				client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			n.Expect(rs, []string{"a"})
			if why := n.Hold(ctx, pod); why == "" {
				t.Fatal("Hold passes a successor the surge expects; want it held while it is nominated")
			}
			if tc.forget {
				n.Forget(rs)
			}
			// put back in the queue, where it passes (nothing else lets it pass first here)
			err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return queue.count("ns/s1") > 0, nil
			})
			if err != nil {
				t.Errorf("the successor was never put back in the queue: %v", err)
			}
			err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return n.Hold(ctx, pod) == "", nil
			})
			if err != nil {
				t.Errorf("the successor is still held: %v", err)
			}
		})
	}
}

// TestAMoveExpectsItsSuccessorsOnTheirTargets: while a Move surges the owner, a new pod of its ReplicaSet is held
// for the node planned for the pod it replaces; once the Move ends (here its successor is never Ready), nothing
// is expected any more.
func TestAMoveExpectsItsSuccessorsOnTheirTargets(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	old := podOf(new(controllerRef("ReplicaSet", "web-abc", "rs-uid")), nil)
	old.UID = "old-uid"
	next := successor("next", "next-uid", newWorld().replicaSet)
	var held string
	n, _, _ := nominationsOf(t, next)
	scales := &scaleServer{replicas: 2, fail: func(call int) (bool, error) {
		if call == 1 {
			held = n.Hold(ctx, next)
		}
		return true, nil
	}}
	s, _ := faultWorld(t, scales, nil, old)
	s.opts.Nominations = n
	res := s.Move(ctx, []*corev1.Pod{old}, func(*corev1.Pod) stevedorev1.Replacement { return stevedorev1.ReplacementSurge },
		map[types.UID]string{"old-uid": "target"}, 100*time.Millisecond)
	if len(res.Moved) != 0 {
		t.Fatalf("Move = %+v; its successor never became Ready, want the pod not moved", res)
	}
	if !strings.Contains(held, "node target") {
		t.Errorf("during the surge, its successor was held with %q; want it nominated to node target", held)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.expected) != 0 || len(n.successors) != 0 {
		t.Errorf("after the Move: %v expected, %d successors kept; want none", n.expected, len(n.successors))
	}
}
