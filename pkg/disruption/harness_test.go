/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// The harness's cloud: one zone of the catalog's region and a handful of general-purpose types, so that each
// simulation stays small. Prices (us-east-1a, on-demand / spot) are the catalog's:
//
//	t3.small   2 vCPU  2 GiB  0.0208 / 0.0066
//	t3.medium  2 vCPU  4 GiB  0.0416 / 0.0156
//	t3.large   2 vCPU  8 GiB  0.0832 / 0.0266
//	c5.large   2 vCPU  4 GiB  0.085  / 0.0298
//	m5.large   2 vCPU  8 GiB  0.096  / 0.0332
//	c5.xlarge  4 vCPU  8 GiB  0.17   / 0.0635
//	m5.xlarge  4 vCPU 16 GiB  0.192  / 0.0718
//	m5.2xlarge 8 vCPU 32 GiB  0.384  / 0.1399
const (
	testRegion = "us-east-1"
	testZone   = "us-east-1a"
)

var testTypes = []string{"t3.small", "t3.medium", "t3.large", "c5.large", "m5.large", "c5.xlarge", "m5.xlarge", "m5.2xlarge"}

// t0 is the harness clock's start; NodeClaims are created an hour earlier unless a test says otherwise.
var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

const (
	onDemand = stevedorev1.CapacityTypeOnDemand
	spot     = stevedorev1.CapacityTypeSpot
)

// harness is a disruption controller over a test environment: listers over the objects, fake clientsets holding
// the same objects (for the status and taint updates the controller writes), a fake cloud and a fake clock.
type harness struct {
	*test.Env
	Cloud *fake.Provider
	c     *Controller
}

// harnessConfig changes the harness before the controller is built.
type harnessConfig struct {
	// types the cloud sells (testTypes if nil; every catalog type if allTypes).
	types    []string
	allTypes bool
	// opts edits the controller's options.
	opts func(*Options)
	// cloud prepares the fake cloud (drift, failures) before anything reads it.
	cloud func(*fake.Provider)
}

// newHarness builds a voluntary disruption controller over objs.
func newHarness(t testing.TB, cfg harnessConfig, objs ...runtime.Object) *harness {
	t.Helper()
	types := cfg.types
	if types == nil && !cfg.allTypes {
		types = testTypes
	}
	cp, err := fake.New([]string{testZone}, types...)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.cloud != nil {
		cfg.cloud(cp)
	}
	env := test.NewEnv(t, t0, objs...)
	cp.SetClock(env.Clock.Now)
	l, kube, client, clk := env.Listers, env.Kube, env.Stevedore, env.Clock
	generated := 0
	client.PrependReactor("create", "nodeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		// the API server names an object by its generateName; the fake clientset does not
		if cl, ok := a.(clienttesting.CreateAction).GetObject().(*stevedorev1.NodeClaim); ok && cl.Name == "" && cl.GenerateName != "" {
			generated++
			cl.Name = fmt.Sprintf("%s%05d", cl.GenerateName, generated)
		}
		return false, nil, nil
	})
	provSim, err := simulation.New(env.Ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disSim, err := simulation.New(env.Ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prov := provision.New(provision.Options{Args: config.ProvisionerArgs{Region: testRegion}, SchedulerName: "stevedore",
		Kube: kube, Stevedore: client, Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims,
		NodePools: l.NodePools, Cloud: cp, Simulator: provSim, Clock: clk})
	opts := Options{Kube: kube, Stevedore: client, Nodes: l.Nodes, Pods: l.Pods, PDBs: l.PDBs, NodeClaims: l.NodeClaims,
		NodePools: l.NodePools, Provisioner: prov, Cloud: cp, Simulator: disSim, Recorder: env.Recorder, Clock: steppingClock{clk}}
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	return &harness{Env: env, Cloud: cp, c: New(opts)}
}

// steppingClock is the fake clock, except that a wait ends at once, moving the time on by its length: a pass's
// ValidationDelay elapses without a goroutine stepping the clock.
type steppingClock struct{ *clocktesting.FakeClock }

func (c steppingClock) After(d time.Duration) <-chan time.Time {
	c.Step(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// view reads the cluster as a pass would, failing the test on error.
func (h *harness) view() *clusterView {
	h.T.Helper()
	h.c.removals.reset()
	v, err := h.c.view(context.Background())
	if err != nil {
		h.T.Fatal(err)
	}
	return v
}

// find runs one method over a fresh view.
func (h *harness) find(m Method) *Command {
	h.T.Helper()
	cmd, err := m.Find(h.Ctx, h.view())
	if err != nil {
		h.T.Fatalf("%s: %v", m.Name(), err)
	}
	return cmd
}

// method returns the controller's method of that name.
func (h *harness) method(name string) Method {
	h.T.Helper()
	for _, m := range h.c.methods {
		if m.Name() == name {
			return m
		}
	}
	h.T.Fatalf("no method %s (disruption off %v)", name, h.c.opts.Args.DisableDisruption)
	return nil
}

// deleteNow deletes a NodeClaim from the fake API server at once, its finalizers removed as termination would.
func (h *harness) deleteNow(name string) {
	h.T.Helper()
	claims := h.Stevedore.StevedoreV1().NodeClaims()
	if err := claims.Delete(h.Ctx, name, metav1.DeleteOptions{}); err != nil {
		h.T.Fatal(err)
	}
	cl, err := claims.Get(h.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		h.T.Fatal(err)
	}
	cl.Finalizers = nil
	if _, err := claims.Update(h.Ctx, cl, metav1.UpdateOptions{}); err != nil {
		h.T.Fatal(err)
	}
}

// claim reads a NodeClaim back from the fake API server.
func (h *harness) claim(name string) *stevedorev1.NodeClaim {
	h.T.Helper()
	cl, err := h.Stevedore.StevedoreV1().NodeClaims().Get(h.Ctx, name, metav1.GetOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	return cl
}

// candidate returns the view's candidate on the named node, or nil.
func (v *clusterView) candidate(node string) *Candidate {
	for _, c := range v.candidates {
		if c.Node.Name == node {
			return c
		}
	}
	return nil
}

// instanceTypes are the catalog's types as the fake cloud builds them, by name (for node allocatable and prices).
var instanceTypes = func() map[string]*cloud.InstanceType {
	cp, err := fake.New([]string{testZone})
	if err != nil {
		panic(err)
	}
	out := map[string]*cloud.InstanceType{}
	its, err := cp.InstanceTypes(context.Background(), &stevedorev1.NodePool{})
	if err != nil {
		panic(err)
	}
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}()

// priceOf is the catalog price of an offering in testZone.
func priceOf(typ, capacityType string) float64 {
	if capacityType == stevedorev1.CapacityTypeReserved {
		return priceOf(typ, onDemand) / 1e7 // a reserved offering's price, as the AWS provider gives it
	}
	it := instanceTypes[typ]
	if it == nil {
		panic("unknown instance type " + typ)
	}
	for _, o := range it.Offerings {
		if o.Zone == testZone && o.CapacityType == capacityType {
			return o.Price
		}
	}
	panic(fmt.Sprintf("no %s offering of %s in %s", capacityType, typ, testZone))
}

// machine describes a launched, initialized node of a NodePool.
type machine struct {
	name, pool, typ, capacity string
	created                   time.Time // t0-1h if zero
	claim                     func(*test.NodeClaimWrapper)
	node                      func(*test.NodeWrapper)
}

// objs returns the machine's NodeClaim (named after the node with a "claim-" prefix) and Node, the node's
// allocatable that of its instance type.
func (m machine) objs() []runtime.Object {
	created := m.created
	if created.IsZero() {
		created = t0.Add(-time.Hour)
	}
	capacity := m.capacity
	if capacity == "" {
		capacity = onDemand
	}
	// Created first: the conditions' transition times are copied from the creation time.
	cw := test.NodeClaim("claim-"+m.name, m.pool).Created(created).
		Launched(m.name, m.typ, testZone, capacity, strconv.FormatFloat(priceOf(m.typ, capacity), 'f', -1, 64)).Initialized()
	if m.claim != nil {
		m.claim(cw)
	}
	nw := cw.NodeFor().Labels(corev1.LabelTopologyRegion, testRegion)
	nw.Status.Capacity = instanceTypes[m.typ].Capacity.DeepCopy()
	nw.Status.Allocatable = instanceTypes[m.typ].Allocatable()
	nw.CreationTimestamp = metav1.NewTime(created)
	if m.node != nil {
		m.node(nw)
	}
	return []runtime.Object{cw.Obj(), nw.Obj()}
}

// node is a machine of NodePool "default" with the default on-demand capacity.
func node(name, typ string) machine { return machine{name: name, pool: "default", typ: typ} }

// pod is a ReplicaSet pod bound to a node with cpu and memory requests.
func pod(name, nodeName, cpu, mem string) *test.PodWrapper {
	return test.Pod(name).Node(nodeName).Req("cpu", cpu, "memory", mem).OwnedBy("ReplicaSet", "rs-"+name).
		Labels("app", name)
}

// objects flattens machines, wrappers and objects into one list.
func objects(items ...any) []runtime.Object {
	var out []runtime.Object
	for _, it := range items {
		switch v := it.(type) {
		case machine:
			out = append(out, v.objs()...)
		case []machine:
			for _, m := range v {
				out = append(out, m.objs()...)
			}
		case *test.PodWrapper:
			out = append(out, v.Obj())
		case *test.NodePoolWrapper:
			out = append(out, v.Obj())
		case *test.DaemonSetWrapper:
			out = append(out, v.Obj())
		case runtime.Object:
			out = append(out, v)
		case []runtime.Object:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("objects: unexpected %T", it))
		}
	}
	return out
}

// pdb selects pods labelled app=app in namespace default, allowing allowed disruptions.
func pdb(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

// dur returns a pointer to d (for NodePoolWrapper.Consolidation).
func dur(d time.Duration) *time.Duration { return &d }

// names lists the candidates' node names in command order.
func names(cands []*Candidate) []string {
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		out = append(out, c.Node.Name)
	}
	return out
}

// commandNames lists a command's candidates sorted, or nil for no command.
func commandNames(cmd *Command) []string {
	if cmd == nil {
		return nil
	}
	out := names(cmd.Candidates)
	sort.Strings(out)
	return out
}
