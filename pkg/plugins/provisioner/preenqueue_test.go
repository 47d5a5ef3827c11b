/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/stevedore-dev/stevedore/pkg/surge"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// holdBackend answers Hold from the surge's nominations; the rest of Backend is not used by PreEnqueue.
type holdBackend struct {
	Backend
	*surge.Nominations
}

func (b holdBackend) Hold(ctx context.Context, pod *corev1.Pod) string {
	return b.Nominations.Hold(ctx, pod)
}

func (holdBackend) Admit(context.Context, *corev1.Pod) string { return "" }

// TestASurgeSuccessorEntersTheQueueNominated runs kube-scheduler's real scheduling queue with the plugin at
// PreEnqueue: a new pod of a ReplicaSet a surge expects on node "target" is held out of the queue, nominated
// through the API, and enters the queue (activated by the nominations) only once the queue's copy shows it, so
// that its first scheduling cycle tries that node first. A pod of another owner enters at once.
func TestASurgeSuccessorEntersTheQueueNominated(t *testing.T) {
	schedmetrics.Register()
	ctx := t.Context()
	logger := klog.FromContext(ctx)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault, UID: "ReplicaSet-web"}}
	next := test.Pod("next").Pending().OwnedBy("ReplicaSet", "web").Obj()
	next.Spec.SchedulerName = "stevedore"
	other := test.Pod("other").Pending().Obj()
	other.Spec.SchedulerName = "stevedore"
	client := fake.NewClientset(next)

	var q *internalqueue.PriorityQueue
	activate := activatorFunc(func(logger klog.Logger, pods map[string]*corev1.Pod) { q.Activate(logger, pods) })
	nominations := surge.NewNominations(surge.NominationOptions{Kube: client, Queue: activate, Interval: time.Millisecond, Timeout: time.Minute})
	plugin := &Provisioner{shared: &Shared{prov: holdBackend{Nominations: nominations}}}
	q = internalqueue.NewTestQueue(ctx, func(a, b fwk.QueuedEntityInfo) bool { return a.GetTimestamp().Before(b.GetTimestamp()) },
		internalqueue.WithPreEnqueuePluginMap(map[string]map[string]fwk.PreEnqueuePlugin{"stevedore": {Name: plugin}}))
	nominations.Expect(rs, []string{"target"})

	q.Add(ctx, next)
	q.Add(ctx, other)
	first, err := q.Pop(logger)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.(*framework.QueuedPodInfo).Pod.Name; got != "other" {
		t.Fatalf("first pod out of the queue is %s; want other, the successor being held", got)
	}
	// the scheduler's informer delivers the nomination written through the API
	var seen *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := client.CoreV1().Pods(next.Namespace).Get(ctx, next.Name, metav1.GetOptions{})
		seen = cur
		return err == nil && cur.Status.NominatedNodeName != "", err
	})
	if err != nil {
		t.Fatalf("the successor was not nominated: %v", err)
	}
	q.Update(ctx, next, seen)
	popped := make(chan *corev1.Pod, 1)
	go func() {
		if e, err := q.Pop(logger); err == nil {
			popped <- e.(*framework.QueuedPodInfo).Pod
		}
	}()
	select {
	case pod := <-popped:
		if pod.Name != "next" || pod.Status.NominatedNodeName != "target" {
			t.Errorf("popped %s nominated to %q; want next, nominated to target", pod.Name, pod.Status.NominatedNodeName)
		}
	case <-time.After(30 * time.Second):
		q.Close()
		t.Fatal("the successor never entered the scheduling queue")
	}
}

type activatorFunc func(klog.Logger, map[string]*corev1.Pod)

func (f activatorFunc) Activate(logger klog.Logger, pods map[string]*corev1.Pod) { f(logger, pods) }
