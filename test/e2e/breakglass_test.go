/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestTheBreakGlassStepSendsPodsToTheDefaultSchedulerWhileStevedoreIsAway follows docs/operations.md "When
// Stevedore is down": with no replica running, the pods of an opted-in namespace wait Pending although existing
// nodes have room; the break-glass step (relabel the opted-in namespaces, delete their Pending pods) has their
// controllers recreate them for the default scheduler, which binds them; undoing it once Stevedore is back sends new
// pods to Stevedore again.
func TestTheBreakGlassStepSendsPodsToTheDefaultSchedulerWhileStevedoreIsAway(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	dir := t.TempDir()
	_, kubeconfig, envFile := startSandbox(t, scheduler, dir)
	c := connect(t, kubeconfig, envFile)
	k := func(args ...string) string {
		t.Helper()
		out, err := run(t, nil, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	config := schedulerConfig(t, dir, "breakglass.yaml", func(map[string]any, map[string]any) {})
	startStevedore := func() *process {
		lead := make(chan struct{}, 1)
		p := start(t, c.env, func(line string) {
			if strings.Contains(line, leadLine) {
				select {
				case lead <- struct{}{}:
				default:
				}
			}
		}, scheduler, "--config", config, "--kubeconfig", kubeconfig, "--secure-port=0")
		if why := waitFor(context.Background(), 2*time.Minute, func(context.Context) string {
			select {
			case <-lead:
				return ""
			default:
				return "Stevedore does not lead"
			}
		}); why != "" {
			t.Fatal(why)
		}
		return p
	}
	stevedore := startStevedore()

	// an opted-in namespace whose pods fit the bootstrap nodes (they tolerate CriticalAddonsOnly)
	ctx := context.Background()
	ns := "breakglass"
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"stevedore.dev/scheduling": "enabled"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := harness.Deployment(ns, "app", 1, "100m", "128Mi")
	d.Spec.Template.Spec.SchedulerName = "" // opted in by the namespace, as a workload that names no scheduler
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// bound pods by scheduler name, and how many wait
	pods := func() (map[string]int, int, error) {
		list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, 0, err
		}
		bound, pending := map[string]int{}, 0
		for _, p := range list.Items {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Spec.NodeName == "":
				pending++
			default:
				bound[p.Spec.SchedulerName]++
			}
		}
		return bound, pending, nil
	}
	want := func(what string, stevedoreBound, defaultBound, pending int) {
		t.Helper()
		eventually(t, what, func() error {
			bound, waiting, err := pods()
			if err != nil {
				return err
			}
			if bound["stevedore"] != stevedoreBound || bound[corev1.DefaultSchedulerName] != defaultBound || waiting != pending {
				return fmt.Errorf("bound %v, %d pending", bound, waiting)
			}
			return nil
		})
	}
	want("the first pod bound by Stevedore", 1, 0, 0)

	// Stevedore is away: new pods of the namespace are Stevedore's and wait
	if err := stevedore.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
	c.scale(t, ns, 3)
	want("two new pods Pending for Stevedore", 1, 0, 2)

	// break glass (docs/operations.md)
	k("label", "namespace", "-l", "stevedore.dev/scheduling=enabled", "stevedore.dev/scheduling=suspended", "--overwrite")
	k("delete", "pods", "-n", ns, "--field-selector", "status.phase=Pending,spec.schedulerName=stevedore", "--wait=false")
	want("the recreated pods bound by the default scheduler", 1, 2, 0)

	// Stevedore is back: undo, and new pods are Stevedore's again
	stevedore = startStevedore()
	k("label", "namespace", "-l", "stevedore.dev/scheduling=suspended", "stevedore.dev/scheduling=enabled", "--overwrite")
	c.scale(t, ns, 4)
	want("the next pod bound by Stevedore", 2, 2, 0)
	if err := stevedore.stop(t); err != nil {
		t.Logf("the scheduler exited with %v after SIGTERM", err)
	}
}
