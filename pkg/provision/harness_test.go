/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every harness test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const testRegion = "us-east-1"

// harness is a Provisioner over a test cluster and a fake cloud, at a fake time.
type harness struct {
	t       *testing.T
	ctx     context.Context
	clock   *clocktesting.FakeClock
	cluster *test.Cluster
	kube    *kubefake.Clientset
	sd      *stevedorefake.Clientset
	listers *test.Listers
	cloud   *fake.Provider
	rec     *events.FakeRecorder
	prov    *Provisioner
}

// newHarness puts objs into the listers and into the clientset that serves them.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	clock := clocktesting.NewFakeClock(t0)
	cluster := test.NewCluster(t, clock.Now, objs...)
	cl, err := fake.New([]string{"us-east-1a", "us-east-1b"}, "m5.large", "m5.xlarge")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: klog.NewContext(t.Context(), ktesting.NewLogger(t, ktesting.NewConfig())), clock: clock,
		cluster: cluster, kube: cluster.Kube, sd: cluster.Stevedore, listers: cluster.Listers, cloud: cl, rec: events.NewFakeRecorder(100)}
	l := cluster.Listers
	h.prov = New(Options{ClusterName: "test", Region: testRegion, Kube: h.kube, Stevedore: h.sd,
		Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims,
		NodePools: l.NodePools, Cloud: cl, Recorder: h.rec, Clock: h.clock})
	return h
}

// add puts an object into the listers and its clientset after the harness is built.
func (h *harness) add(obj runtime.Object) { h.t.Helper(); h.cluster.Add(obj) }

// pod reads a pod back from the clientset.
func (h *harness) pod(name string) *corev1.Pod { h.t.Helper(); return h.cluster.Pod(name) }
