/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provreq

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalinglisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func indexer(objs ...runtime.Object) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			panic(err)
		}
	}
	return idx
}

type requestWrapper struct {
	autoscalingv1.ProvisioningRequest
}

func request(class string, count int32, age time.Duration) *requestWrapper {
	return &requestWrapper{autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: "worker"}, Count: count}}}}}
}

// condition sets a condition True.
func (w *requestWrapper) condition(condition string, reason string, ago time.Duration) *requestWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: condition, Status: metav1.ConditionTrue, Reason: reason,
		LastTransitionTime: metav1.NewTime(t0.Add(-ago))})
	return w
}

func (w *requestWrapper) param(key, value string) *requestWrapper {
	if w.Spec.Parameters == nil {
		w.Spec.Parameters = map[string]autoscalingv1.Parameter{}
	}
	w.Spec.Parameters[key] = autoscalingv1.Parameter(value)
	return w
}

func consumer(name, request, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
		Annotations: map[string]string{autoscalingv1.AnnotationConsume: request}},
		Spec: corev1.PodSpec{NodeName: node}}
}

var workerTemplate = &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "ml"},
	Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "train"}}}}}

// TestStepsThatNeedNoSolve covers every state of a request that the controller settles without looking for room:
// those it leaves (finished, another class), those it cannot read, booked ones (held, consumed, expired) and
// atomic ones out of time.
func TestStepsThatNeedNoSolve(t *testing.T) {
	booked := func(age time.Duration) *requestWrapper {
		return request(autoscalingv1.ClassBestEffortAtomicScaleUp, 3, time.Hour).
			condition(autoscalingv1.ConditionAccepted, ReasonAccepted, age).
			condition(autoscalingv1.ConditionProvisioned, ReasonCapacityIsProvisioned, age)
	}
	cases := []struct {
		name      string
		request   *requestWrapper
		pods      []runtime.Object
		noTmpl    bool
		wantHeld  int
		wantCond  string // condition set: type=status/reason; "" for no write
		wantHolds bool
	}{
		{name: "another class is left to whoever serves it", request: request("queued-provisioning.gke.io", 3, 0)},
		{name: "failed is final", request: request(autoscalingv1.ClassCheckCapacity, 3, 0).
			condition(autoscalingv1.ConditionFailed, ReasonCapacityIsNotFound, time.Minute)},
		{name: "expired is final", request: booked(time.Hour).
			condition(autoscalingv1.ConditionBookingExpired, ReasonBookingTimeExpired, time.Minute)},
		{name: "a missing PodTemplate is named and tried again", request: request(autoscalingv1.ClassCheckCapacity, 3, 0),
			noTmpl: true, wantCond: "Accepted=False/" + ReasonPodTemplateNotFound},
		{name: "booked and no pod come: all held", request: booked(time.Minute), wantHeld: 3, wantCond: "Accepted=True/Accepted", wantHolds: true},
		{name: "booked, one pod pending and one bound: one held", request: booked(time.Minute),
			pods:     []runtime.Object{consumer("a", "train", ""), consumer("b", "train", "node-1"), consumer("other", "infer", "node-1")},
			wantHeld: 1, wantCond: "Accepted=True/Accepted", wantHolds: true},
		{name: "booked and every pod bound: consumed", request: booked(time.Minute),
			pods:     []runtime.Object{consumer("a", "train", "node-1"), consumer("b", "train", "node-1"), consumer("c", "train", "node-2")},
			wantCond: "BookingExpired=True/" + ReasonBookingConsumed},
		{name: "booked for the booking time: expired", request: booked(10 * time.Minute),
			pods:     []runtime.Object{consumer("a", "train", "node-1")},
			wantCond: "BookingExpired=True/" + ReasonBookingTimeExpired},
		{name: "atomic past ValidUntilSeconds: failed", request: request(autoscalingv1.ClassBestEffortAtomicScaleUp, 3, 2*time.Minute).
			param(autoscalingv1.ParameterValidUntilSeconds, "60"), wantCond: "Failed=True/" + ReasonValidUntilExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pr := &tc.request.ProvisioningRequest
			client := fake.NewSimpleClientset(pr.DeepCopy())
			var templates []runtime.Object
			if !tc.noTmpl {
				templates = append(templates, workerTemplate)
			}
			c := New(Options{Stevedore: client, Requests: autoscalinglisters.NewProvisioningRequestLister(indexer(pr)),
				Templates: corelisters.NewPodTemplateLister(indexer(templates...)), Pods: corelisters.NewPodLister(indexer(tc.pods...)),
				Nodes: corelisters.NewNodeLister(indexer()), NodeClaims: listers.NewNodeClaimLister(indexer()),
				Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0)})
			if err := c.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(c.Pods()); got != tc.wantHeld {
				t.Errorf("%d pods held, want %d", got, tc.wantHeld)
			}
			if got := c.Holds("ml/train"); got != tc.wantHolds {
				t.Errorf("Holds = %v, want %v", got, tc.wantHolds)
			}
			written, err := client.AutoscalingXV1().ProvisioningRequests("ml").Get(ctx, "train", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCond == "" {
				if len(client.Actions()) > 1 { // the Get above
					t.Errorf("wrote %v, want nothing", client.Actions())
				}
				return
			}
			var typ, want string
			for i := range tc.wantCond {
				if tc.wantCond[i] == '=' {
					typ, want = tc.wantCond[:i], tc.wantCond[i+1:]
					break
				}
			}
			got := meta.FindStatusCondition(written.Status.Conditions, typ)
			if got == nil || string(got.Status)+"/"+got.Reason != want {
				t.Fatalf("condition %s = %+v, want %s", typ, got, want)
			}
		})
	}
}

// TestABookedRequestReachesAFixedPoint checks that a pass over a request whose state has not changed writes
// nothing.
func TestABookedRequestReachesAFixedPoint(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pr := request(autoscalingv1.ClassCheckCapacity, 2, time.Hour).
		condition(autoscalingv1.ConditionProvisioned, ReasonCapacityIsFound, time.Minute).ProvisioningRequest
	client := fake.NewSimpleClientset(pr.DeepCopy())
	requests := indexer(&pr)
	c := New(Options{Stevedore: client, Requests: autoscalinglisters.NewProvisioningRequestLister(requests),
		Templates: corelisters.NewPodTemplateLister(indexer(workerTemplate)), Pods: corelisters.NewPodLister(indexer()),
		Nodes: corelisters.NewNodeLister(indexer()), NodeClaims: listers.NewNodeClaimLister(indexer()),
		Clock: clocktesting.NewFakePassiveClock(t0)})
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	written, err := client.AutoscalingXV1().ProvisioningRequests("ml").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := requests.Update(written); err != nil { // the informer catches up
		t.Fatal(err)
	}
	client.ClearActions()
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("the second pass made %d calls (%v), want none", len(client.Actions()), client.Actions())
	}
	if len(c.Pods()) != 2 {
		t.Errorf("%d pods held, want 2", len(c.Pods()))
	}
}

func TestVirtualPodsCopyTheTemplateCountTimes(t *testing.T) {
	pr := request(autoscalingv1.ClassCheckCapacity, 2, 0)
	pr.Spec.PodSets = append(pr.Spec.PodSets, autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "worker"}, Count: 1})
	c := New(Options{Templates: corelisters.NewPodTemplateLister(indexer(workerTemplate))})
	pods, err := c.virtualPods(&pr.ProvisioningRequest)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range pods {
		uids = append(uids, string(p.UID))
		if p.Namespace != "ml" || p.Spec.Containers[0].Image != "train" || p.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s: %+v, want the template's pending in ml", p.Name, p)
		}
	}
	want := []string{"provisioningrequest/ml/train/0/0", "provisioningrequest/ml/train/0/1", "provisioningrequest/ml/train/1/0"}
	if len(uids) != len(want) {
		t.Fatalf("UIDs %v, want %v", uids, want)
	}
	for i := range want {
		if uids[i] != want[i] {
			t.Errorf("UIDs %v, want %v", uids, want)
			break
		}
	}
}

// TestAFinishedConsumerKeepsItsRoomTaken checks that a consumer seen bound still counts once it has left the pod
// cache (the scheduler's informer lists no finished pod): its room is not booked again.
func TestAFinishedConsumerKeepsItsRoomTaken(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pr := request(autoscalingv1.ClassBestEffortAtomicScaleUp, 3, time.Hour).
		condition(autoscalingv1.ConditionProvisioned, ReasonCapacityIsProvisioned, time.Minute).ProvisioningRequest
	pods := indexer(consumer("a", "train", "node-1"), consumer("b", "train", "node-2"))
	c := New(Options{Stevedore: fake.NewSimpleClientset(pr.DeepCopy()), Requests: autoscalinglisters.NewProvisioningRequestLister(indexer(&pr)),
		Templates: corelisters.NewPodTemplateLister(indexer(workerTemplate)), Pods: corelisters.NewPodLister(pods),
		Nodes: corelisters.NewNodeLister(indexer()), NodeClaims: listers.NewNodeClaimLister(indexer()),
		Clock: clocktesting.NewFakePassiveClock(t0)})
	for pass, visible := range [][]string{{"a", "b"}, nil} {
		for _, name := range []string{"a", "b"} {
			if !slices.Contains(visible, name) {
				_ = pods.Delete(consumer(name, "train", ""))
			}
		}
		if err := c.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(c.Pods()); got != 1 {
			t.Errorf("pass %d: %d pods held, want 1 (two of three consumed)", pass, got)
		}
	}
	// the third binds and finishes between two passes: only the informer's events show it bound
	c.observe(cache.DeletedFinalStateUnknown{Key: "ml/c", Obj: consumer("c", "train", "node-3")})
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Pods()); got != 0 || c.Holds("ml/train") {
		t.Errorf("%d pods held (holds %v) once the three consumers were bound, want none", got, c.Holds("ml/train"))
	}
}
