/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

type recordingInterrupter struct {
	mu   sync.Mutex
	reqs []disruption.InterruptRequest
}

func (r *recordingInterrupter) Interrupt(_ context.Context, req disruption.InterruptRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return nil
}

type recordingMarks struct{ marks []string }

type recordingHistory struct {
	mu       sync.Mutex
	recorded []string
}

func (r *recordingHistory) Record(nodePool, instanceType, zone string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recorded = append(r.recorded, nodePool+" "+instanceType+"/"+zone)
}

func (r *recordingMarks) MarkUnavailable(instanceType, zone, capacityType, _ string) {
	r.marks = append(r.marks, instanceType+"/"+zone+"/"+capacityType)
}

func TestHandle(t *testing.T) {
	const id = "i-0123456789abcdef0"
	now := time.Date(2026, 11, 26, 10, 0, 30, 0, time.UTC) // 30s after the events' time
	tests := []struct {
		name      string
		body      string
		rebalance string
		want      *disruption.InterruptRequest
		wantMarks int
	}{
		{name: "spot: forceful, wait until the drain margin, offering marked",
			body: envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"`+id+`"}`),
			want: &disruption.InterruptRequest{NodeClaim: "c", Reason: ReasonSpotInterrupted, Forceful: true, ReplacementWait: 60 * time.Second}, wantMarks: 1},
		{name: "stopping: forceful, no wait",
			body: envelopeJSON("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"`+id+`","state":"stopping"}`),
			want: &disruption.InterruptRequest{NodeClaim: "c", Reason: ReasonInstanceStateChange, Forceful: true}},
		{name: "scheduled change: forceful, full wait",
			body: envelopeJSON("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"`+id+`"}]}`),
			want: &disruption.InterruptRequest{NodeClaim: "c", Reason: ReasonScheduledChange, Forceful: true, ReplacementWait: 15 * time.Minute}},
		{name: "rebalance with Replace: within budgets", rebalance: RebalanceReplace,
			body: envelopeJSON("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"`+id+`"}`),
			want: &disruption.InterruptRequest{NodeClaim: "c", Reason: ReasonRebalanceRecommended, ReplacementWait: 15 * time.Minute}},
		{name: "rebalance as event only (the default)",
			body: envelopeJSON("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"`+id+`"}`)},
		{name: "unknown instance",
			body: envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0fffffffffffffff0"}`)},
		{name: "malformed", body: "{"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := test.NewListers(test.NodeClaim("c", "default").
				Launched("ip-10-0-0-1.ec2.internal", "m7g.large", "us-east-1a", "spot", "0.0300").InstanceID(id).Obj())
			if err != nil {
				t.Fatal(err)
			}
			rec, marks, history := &recordingInterrupter{}, &recordingMarks{}, &recordingHistory{}
			c := New(Options{NodeClaims: l.NodeClaims, Interrupter: rec, Offerings: marks, History: history,
				Clock: clocktesting.NewFakeClock(now), Args: config.ProvisionerArgs{RebalanceAction: tc.rebalance}})
			c.Handle(context.Background(), tc.body)
			c.Handle(context.Background(), tc.body) // a repeated notice while the first is handled, or after
			c.wg.Wait()
			if tc.want == nil {
				if len(rec.reqs) != 0 {
					t.Fatalf("got requests %+v, want none", rec.reqs)
				}
				return
			}
			if len(rec.reqs) == 0 || rec.reqs[0] != *tc.want {
				t.Fatalf("got requests %+v, want %+v", rec.reqs, *tc.want)
			}
			if len(marks.marks) < tc.wantMarks || (tc.wantMarks > 0 && marks.marks[0] != "m7g.large/us-east-1a/spot") {
				t.Errorf("got marks %v, want m7g.large/us-east-1a/spot", marks.marks)
			}
			// a spot interruption is in the history of its pool and NodePool; nothing else is
			if tc.wantMarks > 0 {
				if len(history.recorded) == 0 || history.recorded[0] != "default m7g.large/us-east-1a" {
					t.Errorf("history recorded %v, want [default m7g.large/us-east-1a]", history.recorded)
				}
			} else if len(history.recorded) > 0 {
				t.Errorf("history recorded %v, want nothing", history.recorded)
			}
		})
	}
}

func TestAnInterruptedNodeOfAGangIsReportedOnItsPodGroup(t *testing.T) {
	const id, node = "i-0123456789abcdef0", "ip-10-0-0-1.ec2.internal"
	worker := func(name, nodeName string) *corev1.Pod {
		return test.Pod(name).Node(nodeName).Labels(schedv1alpha1.PodGroupLabel, "train").Obj()
	}
	// a gang of the Workload API beside it
	infer := test.Pod("x0").Node(node).Obj()
	infer.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("infer")}
	l, err := test.NewListers(test.NodeClaim("c", "default").Launched(node, "p4d.24xlarge", "us-east-1a", "spot", "10.0").InstanceID(id).Obj(),
		worker("w1", node), worker("w0", node), worker("w2", "ip-10-0-0-2.ec2.internal"), test.Pod("web").Node(node).Obj(), infer)
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	train := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train"}}
	c := New(Options{NodeClaims: l.NodeClaims, Interrupter: &recordingInterrupter{}, Offerings: &recordingMarks{}, Recorder: recorder,
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 30, 0, time.UTC)), Pods: l.Pods,
		Gangs: test.PodGroups{{Namespace: "default", Name: "train"}: train},
		WorkloadGroups: test.WorkloadPodGroups{{API: gang.Workload, Namespace: "default", Name: "infer"}: {
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "infer"}}}})
	c.Handle(context.Background(), envelopeJSON("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"`+id+`"}`))
	c.wg.Wait()
	var onGang []string
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, ReasonGangInterrupted) {
			onGang = append(onGang, e)
		}
	}
	want := []string{"Warning GangInterrupted SpotInterruption: node " + node + " (NodeClaim c) of the gang is being drained; its pods x0 stop",
		"Warning GangInterrupted SpotInterruption: node " + node + " (NodeClaim c) of the gang is being drained; its pods w0, w1 stop"}
	if diff := cmp.Diff(want, onGang); diff != "" {
		t.Errorf("events on the PodGroup (-want +got):\n%s", diff)
	}
}
