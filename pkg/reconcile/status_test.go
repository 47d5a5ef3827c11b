/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
)

func TestUpdateStatus(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	setPhase := func(n *corev1.Node) bool {
		if n.Status.Phase == corev1.NodeRunning {
			return false
		}
		n.Status.Phase = corev1.NodeRunning
		return true
	}
	for _, tc := range []struct {
		name        string
		objects     []runtime.Object
		conflicts   int // updates refused with a conflict before one goes through
		failing     error
		wantWritten bool
		wantErr     bool
		wantUpdates int
		wantGets    int
		wantRunning bool
	}{
		{name: "written", objects: []runtime.Object{node.DeepCopy()}, wantWritten: true, wantUpdates: 1, wantGets: 1, wantRunning: true},
		{name: "nothing to change: no write", objects: []runtime.Object{func() *corev1.Node {
			n := node.DeepCopy()
			n.Status.Phase = corev1.NodeRunning
			return n
		}()}, wantGets: 1, wantRunning: true},
		{name: "a conflict reads the object again", objects: []runtime.Object{node.DeepCopy()}, conflicts: 2, wantWritten: true,
			wantUpdates: 3, wantGets: 3, wantRunning: true},
		{name: "gone: no error, not written", wantGets: 1},
		{name: "another error is returned", objects: []runtime.Object{node.DeepCopy()}, failing: errors.New("etcd timeout"),
			wantErr: true, wantUpdates: 1, wantGets: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objects...)
			conflicts := tc.conflicts
			cs.PrependReactor("update", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
				switch {
				case tc.failing != nil:
					return true, nil, tc.failing
				case conflicts > 0:
					conflicts--
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
				}
				return false, nil, nil
			})
			written, err := UpdateStatus(context.Background(), cs.CoreV1().Nodes(), "n1", setPhase)
			if written != tc.wantWritten || (err != nil) != tc.wantErr {
				t.Fatalf("UpdateStatus = %v, %v; want %v, error %v", written, err, tc.wantWritten, tc.wantErr)
			}
			gets, updates := 0, 0
			for _, a := range cs.Actions() {
				switch {
				case a.GetVerb() == "get":
					gets++
				case a.GetVerb() == "update" && a.GetSubresource() == "status":
					updates++
				}
			}
			if gets != tc.wantGets || updates != tc.wantUpdates {
				t.Errorf("%d gets and %d status updates, want %d and %d", gets, updates, tc.wantGets, tc.wantUpdates)
			}
			if got, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{}); err == nil &&
				(got.Status.Phase == corev1.NodeRunning) != tc.wantRunning {
				t.Errorf("stored phase %q, want running %v", got.Status.Phase, tc.wantRunning)
			}
		})
	}
}

// Every runs its pass again and again until the context ends, whether a pass fails or not.
func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	passes := 0
	Every(ctx, "test", 0, "pass failed", func(context.Context) error {
		passes++
		if passes == 5 {
			cancel()
		}
		return errors.New("every pass fails")
	})
	if passes != 5 {
		t.Errorf("%d passes, want 5 (the last one ended the context)", passes)
	}
}

func TestReportConditionTellsOnlyStatusAndReasonChanges(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cond := func(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
		return &metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: message}
	}
	for _, tc := range []struct {
		name    string
		before  *metav1.Condition
		now     *metav1.Condition
		warning bool
		want    []string
	}{
		{name: "a new condition", now: cond(metav1.ConditionTrue, "Fine", "all good"), want: []string{"Normal Fine all good"}},
		{name: "the message alone changed", before: cond(metav1.ConditionTrue, "Fine", "old"), now: cond(metav1.ConditionTrue, "Fine", "new")},
		{name: "the reason changed", before: cond(metav1.ConditionFalse, "Waiting", ""), now: cond(metav1.ConditionFalse, "Stuck", "no room"),
			warning: true, want: []string{"Warning Stuck no room"}},
		{name: "the status changed", before: cond(metav1.ConditionFalse, "Same", ""), now: cond(metav1.ConditionTrue, "Same", "up"),
			want: []string{"Normal Same up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			ReportCondition(context.Background(), rec, node, "Node", "Check", tc.before, *tc.now, tc.warning)
			ReportCondition(context.Background(), nil, node, "Node", "Check", tc.before, *tc.now, tc.warning) // no recorder: logs only
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
