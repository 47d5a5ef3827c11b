/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestTheSchedulingPolicyOptsNamespacesInAndKeepsKarpenterOff creates pods of every shape against the shipped
// admission policy (the sandbox installs it as the README's install does): which get the stevedore scheduler, and
// which are kept off Karpenter's nodes with every term of their required node affinity intact. Then a Deployment
// that names no scheduler, in a labelled namespace, runs on a node Stevedore launched for it.
func TestTheSchedulingPolicyOptsNamespacesInAndKeepsKarpenterOff(t *testing.T) {
	ctx := context.Background()
	plain := harness.Namespace(t, sb)
	optedIn := harness.Namespace(t, sb)
	ns, err := sb.Kube.CoreV1().Namespaces().Get(ctx, optedIn, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["stevedore.dev/scheduling"] = "enabled"
	if _, err := sb.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the admission plugin reads namespaces from its own informer: wait until it sees the label
	harness.Eventually(t, "the admission policy to see namespace "+optedIn+" opted in", func(ctx context.Context) (bool, error) {
		probe := harness.Pod(optedIn, "probe", "100m", "64Mi")
		probe.Spec.SchedulerName = ""
		got, err := sb.Kube.CoreV1().Pods(optedIn).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == "stevedore", nil
	})
	term := func(key, value string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
	}
	required := func(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	tests := []struct {
		name, namespace, scheduler string
		mutate                     func(*corev1.Pod)
		wantScheduler              string
		wantKeptOff                bool
		wantTerms                  int
	}{
		{name: "no-scheduler-opted-in", namespace: optedIn, wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "default-scheduler-opted-in", namespace: optedIn, scheduler: "default-scheduler", wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "other-scheduler-opted-in", namespace: optedIn, scheduler: "volcano", wantScheduler: "volcano"},
		{name: "no-scheduler-not-opted-in", namespace: plain, wantScheduler: "default-scheduler"},
		{name: "stevedore-not-opted-in", namespace: plain, scheduler: "stevedore", wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "two-terms", namespace: optedIn, mutate: required(term(corev1.LabelArchStable, "arm64"), term(corev1.LabelTopologyZone, "us-east-1a")),
			wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 2},
		{name: "a-term-of-fields-only", namespace: plain, scheduler: "stevedore", mutate: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}}}), wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "pod-affinity-only", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: corev1.LabelHostname}}}}
		}, wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "preferences-only", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: term(corev1.LabelArchStable, "arm64")}}}}
		}, wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "already-kept-off", namespace: plain, scheduler: "stevedore", mutate: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: sandbox.KarpenterNodePoolLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}}), wantScheduler: "stevedore", wantKeptOff: true, wantTerms: 1},
		{name: "a-daemonset-pod", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "4d3c0a5e-0000-4000-8000-000000000001"}}
		}, wantScheduler: "default-scheduler"},
		{name: "a-pod-with-a-node", namespace: optedIn, mutate: func(p *corev1.Pod) { p.Spec.NodeName = "somewhere" }, wantScheduler: "default-scheduler"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := harness.Pod(tc.namespace, tc.name, "100m", "64Mi")
			pod.Spec.SchedulerName = tc.scheduler
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			got, err := sb.Kube.CoreV1().Pods(tc.namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the API server refused the pod: %v", err)
			}
			if got.Spec.SchedulerName != tc.wantScheduler {
				t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, tc.wantScheduler)
			}
			if kept := sandbox.KeptOffKarpenter(got); kept != tc.wantKeptOff {
				t.Errorf("kept off Karpenter's nodes: %v, want %v (affinity %+v)", kept, tc.wantKeptOff, got.Spec.Affinity)
			}
			if tc.wantTerms > 0 {
				terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != tc.wantTerms {
					t.Errorf("%d required terms, want %d: %+v", len(terms), tc.wantTerms, terms)
				}
				if pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil && pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
					for i, was := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
						now := terms[i]
						if len(now.MatchFields) != len(was.MatchFields) || len(now.MatchExpressions) < len(was.MatchExpressions) {
							t.Errorf("term %d lost what it said: %+v, was %+v", i, now, was)
						}
						for j := range was.MatchExpressions {
							if now.MatchExpressions[j].Key != was.MatchExpressions[j].Key {
								t.Errorf("term %d expression %d is %+v, was %+v", i, j, now.MatchExpressions[j], was.MatchExpressions[j])
							}
						}
					}
				}
				if tc.name == "already-kept-off" && len(terms[0].MatchExpressions) != 1 {
					t.Errorf("a term that already kept Karpenter off got another expression: %+v", terms[0])
				}
			}
		})
	}

	// a workload that names no scheduler, in the labelled namespace, runs on a node Stevedore launches
	iso := "admission"
	harness.NodePool(t, sb, "admission", iso)
	d := harness.Deployment(optedIn, "web", 2, "500m", "256Mi")
	d.Spec.Template.Spec.SchedulerName = ""
	p := harness.Isolated(&corev1.Pod{Spec: d.Spec.Template.Spec}, iso)
	d.Spec.Template.Spec = p.Spec
	if _, err := sb.Kube.AppsV1().Deployments(optedIn).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range harness.WaitRunning(t, sb, optedIn, "web", 2) {
		if pod.Spec.SchedulerName != "stevedore" || !sandbox.KeptOffKarpenter(&pod) {
			t.Errorf("pod %s: schedulerName %q, kept off Karpenter %v", pod.Name, pod.Spec.SchedulerName, sandbox.KeptOffKarpenter(&pod))
		}
		node := harness.Node(t, sb, pod.Spec.NodeName)
		if node.Labels["stevedore.dev/nodepool"] != "admission" {
			t.Errorf("pod %s runs on %s, not on a node of NodePool admission", pod.Name, node.Name)
		}
	}
}
