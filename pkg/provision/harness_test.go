/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every harness test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const testRegion = "us-east-1"

// harness is a Provisioner over a test environment (cluster, fake cloud, fake time).
type harness struct {
	*test.Env
	Cloud *fake.Provider
	prov  *Provisioner
}

// newHarness puts objs into the listers and into the clientset that serves them.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	env := test.NewEnv(t, t0, objs...)
	cloud := fake.ForTest(t, env.Clock.Now, []string{"us-east-1a", "us-east-1b"}, "m5.large", "m5.xlarge")
	l := env.Listers
	return &harness{Env: env, Cloud: cloud, prov: New(Options{Args: config.ProvisionerArgs{Region: testRegion}, Kube: env.Kube, Stevedore: env.Stevedore,
		Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims,
		NodePools: l.NodePools, Cloud: cloud, Recorder: env.Recorder, Clock: env.Clock})}
}

// knowNodes tells the free-room index of the nodes, as the node informer does.
func (h *harness) knowNodes(nodes ...*corev1.Node) {
	onNode, _ := h.prov.free.Handlers()
	for _, n := range nodes {
		onNode.OnAdd(n, false)
	}
}
