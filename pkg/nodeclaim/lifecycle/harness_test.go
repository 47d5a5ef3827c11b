/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/termination"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every lifecycle test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testRegion              = "us-east-1"
	testRegistrationTimeout = 5 * time.Minute
)

// harness is a Lifecycle (and the Terminator it hands deleted NodeClaims to) over a test environment (cluster,
// fake cloud, fake time) and a recording provisioning.
type harness struct {
	*test.Env
	Cloud *fake.Provider
	prov  *provisioning
	life  *Lifecycle
	term  *termination.Terminator
	// initialized collects the node names OnInitialized was called with.
	initialized []string
}

// newHarness puts objs into the listers and into the clientset that serves them.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	env := test.NewEnv(t, t0, objs...)
	h := &harness{Env: env, Cloud: fake.ForTest(t, env.Clock.Now, []string{"us-east-1a", "us-east-1b"}, "m5.large", "m5.xlarge")}
	h.prov = newProvisioning(h.Cloud)
	l := h.Listers
	h.term = termination.New(termination.Options{Kube: h.Kube, Stevedore: h.Stevedore, Cloud: h.Cloud, Nodes: l.Nodes, Pods: l.Pods,
		NodeClaims: l.NodeClaims, Recorder: h.Recorder, Clock: h.Clock, Provisioning: h.prov})
	h.life = New(Options{Kube: h.Kube, Stevedore: h.Stevedore, Cloud: h.Cloud, Nodes: l.Nodes, NodeClaims: l.NodeClaims, Recorder: h.Recorder,
		Clock: h.Clock, Provisioning: h.prov, Terminator: h.term,
		Args:          config.ProvisionerArgs{Region: testRegion, RegistrationTimeout: metav1.Duration{Duration: testRegistrationTimeout}},
		OnInitialized: func(node string) { h.initialized = append(h.initialized, node) }})
	t.Cleanup(h.life.queue.ShutDown)
	return h
}

// claim reads NodeClaim c1 back from the clientset; nil when it is gone.
func (h *harness) claim() *stevedorev1.NodeClaim { h.T.Helper(); return h.NodeClaim("c1") }

// condition returns a NodeClaim's condition of a type, or nil.
func condition(c *stevedorev1.NodeClaim, condType string) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, condType)
}

// provisioning stands in for the provisioner: it keeps the pods planned on NodeClaims, knows the fake cloud's
// instance types, returns a fixed set of DaemonSet pods, and records what it is told.
type provisioning struct {
	mu        sync.Mutex
	types     map[string]*cloud.InstanceType
	assigned  map[string][]*corev1.Pod
	daemonSet []*corev1.Pod            // what DaemonSetPods returns
	expected  map[string][]*corev1.Pod // ExpectDaemons, by node
	told      []string
}

func newProvisioning(cl *fake.Provider) *provisioning {
	p := &provisioning{types: map[string]*cloud.InstanceType{}, assigned: map[string][]*corev1.Pod{}, expected: map[string][]*corev1.Pod{}}
	for _, name := range []string{"m5.large", "m5.xlarge"} {
		p.types[name] = cl.InstanceType(name)
	}
	return p
}

func (p *provisioning) tell(s string) { p.mu.Lock(); p.told = append(p.told, s); p.mu.Unlock() }

// heard returns what provisioning was told so far, in order.
func (p *provisioning) heard() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.told)
}

// assign plans pods on NodeClaim c1.
func (p *provisioning) assign(pods ...*corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.assigned["c1"] = append(p.assigned["c1"], pods...)
}

func (p *provisioning) AssignedPods(claim string) []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.assigned[claim])
}

func (p *provisioning) NominateAssigned(_ context.Context, claim *stevedorev1.NodeClaim) {
	p.tell("nominate " + claim.Name + " on " + claim.Status.NodeName)
}

func (p *provisioning) Replan(_ context.Context, pod *corev1.Pod) {
	p.mu.Lock()
	for claim, pods := range p.assigned {
		p.assigned[claim] = slices.DeleteFunc(pods, func(x *corev1.Pod) bool { return x.UID == pod.UID })
	}
	p.mu.Unlock()
	p.tell("replan " + pod.Name)
}

func (p *provisioning) ClaimInitialized(_ context.Context, name string) {
	p.tell("initialized " + name)
}
func (p *provisioning) NodePoolsChanged(context.Context) { p.tell("nodepools changed") }
func (p *provisioning) OfferingsChanged()                { p.tell("offerings changed") }

func (p *provisioning) InstanceTypesOf(context.Context, *stevedorev1.NodeClaim) map[string]*cloud.InstanceType {
	return p.types
}

func (p *provisioning) DaemonSetPods(context.Context, *stevedorev1.NodeClaim) []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.daemonSet)
}

func (p *provisioning) ExpectDaemons(node string, pods []*corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected[node] = pods
}

// ForgetDaemons is what the terminator tells provisioning when a node is gone.
func (p *provisioning) ForgetDaemons(node string) {
	p.mu.Lock()
	delete(p.expected, node)
	p.mu.Unlock()
	p.tell("forget daemons " + node)
}
