/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package conformance runs the placement scenarios in testdata (see README.md): each is solved offline, exactly as
// `scheduler plan` solves it, and the plan is checked against the scenario's expectations and against the
// properties every plan must have.
package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// minScenarios is the size the suite must keep.
const minScenarios = 60

// header is a scenario file's first document.
type header struct {
	Name      string `json:"name"`
	Karpenter string `json:"karpenter,omitempty"`
	// Origin says where a scenario that is not a Karpenter test comes from (a case the differential test found).
	Origin  string          `json:"origin,omitempty"`
	Differs string          `json:"differs,omitempty"`
	Catalog json.RawMessage `json:"catalog,omitempty"`
	Expect  expect          `json:"expect"`
}

type expect struct {
	Unschedulable []string        `json:"unschedulable,omitempty"`
	Nodes         *int            `json:"nodes,omitempty"`
	MinNodes      *int            `json:"minNodes,omitempty"`
	MaxNodes      *int            `json:"maxNodes,omitempty"`
	NodeLabels    []labelExpect   `json:"nodeLabels,omitempty"`
	SameNode      []podSet        `json:"sameNode,omitempty"`
	DistinctNodes []podSet        `json:"distinctNodes,omitempty"`
	Spread        []spreadExpect  `json:"spread,omitempty"`
	InstanceTypes []instanceTypes `json:"instanceTypes,omitempty"`
}

// podSet names pods by label selector or by name.
type podSet struct {
	Selector string   `json:"selector,omitempty"`
	Names    []string `json:"names,omitempty"`
}

type labelExpect struct {
	podSet
	Equal  map[string]string   `json:"equal,omitempty"`
	In     map[string][]string `json:"in,omitempty"`
	NotIn  map[string][]string `json:"notIn,omitempty"`
	Exists []string            `json:"exists,omitempty"`
	Absent []string            `json:"absent,omitempty"`
}

type spreadExpect struct {
	podSet
	Key     string `json:"key"`
	MaxSkew *int   `json:"maxSkew,omitempty"`
	Domains *int   `json:"domains,omitempty"`
}

type instanceTypes struct {
	podSet
	In    []string `json:"in,omitempty"`
	NotIn []string `json:"notIn,omitempty"`
}

// scenario is a parsed scenario file.
type scenario struct {
	file    string
	header  header
	objects []runtime.Object
	catalog *catalog.File
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < minScenarios {
		t.Fatalf("%d scenarios, the suite keeps at least %d", len(files), minScenarios)
	}
	for _, f := range files {
		sc, err := load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		t.Run(sc.header.Name, func(t *testing.T) { run(t, sc) })
	}
}

func load(file string) (*scenario, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	first, err := reader.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	sc := &scenario{file: file}
	if err := yaml.UnmarshalStrict(first, &sc.header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if want := strings.TrimSuffix(filepath.Base(file), ".yaml"); sc.header.Name != want {
		return nil, fmt.Errorf("name %q, want the file name %q", sc.header.Name, want)
	}
	if sc.header.Karpenter == "" && sc.header.Origin == "" {
		return nil, errors.New("no karpenter: reference to the test the scenario comes from (or origin: for one of Stevedore's own)")
	}
	var rest bytes.Buffer
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rest.WriteString("---\n")
		rest.Write(doc)
	}
	if sc.objects, err = manifest.NewDecoder().Decode(&rest); err != nil {
		return nil, err
	}
	sc.catalog = catalog.Default()
	if len(sc.header.Catalog) > 0 && string(sc.header.Catalog) != "{}" && string(sc.header.Catalog) != "null" {
		if sc.catalog, err = catalog.Read(bytes.NewReader(sc.header.Catalog)); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
	}
	hasPool := false
	for _, o := range sc.objects {
		if _, ok := o.(*stevedorev1.NodePool); ok {
			hasPool = true
		}
	}
	if !hasPool {
		sc.objects = append(sc.objects,
			&stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.NodePoolSpec{Template: stevedorev1.NodeClaimTemplate{
				Spec: stevedorev1.NodeClaimTemplateSpec{NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"}}}}},
			&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	}
	return sc, nil
}

// solved is a plan with what the checks need.
type solved struct {
	problem *solver.OfflineProblem
	plan    *solver.Plan
	sim     *simulation.Simulator
	// nodeOf maps a pod name (namespace/name) to the name of its new node, or to its in-flight node.
	nodeOf map[string]string
	nodes  map[string]*corev1.Node
	pods   map[string]*corev1.Pod
}

func solve(t *testing.T, sc *scenario) *solved {
	t.Helper()
	ctx := context.Background()
	problem, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: sc.objects, Catalog: sc.catalog, VMMemoryOverheadPercent: 7.5})
	if err != nil {
		t.Fatalf("reading the input: %v", err)
	}
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := solver.NewSolver(sim).Solve(ctx, problem.Input(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := &solved{problem: problem, plan: plan, sim: sim, nodeOf: map[string]string{}, nodes: map[string]*corev1.Node{}, pods: map[string]*corev1.Pod{}}
	for _, p := range problem.Pods {
		s.pods[p.Namespace+"/"+p.Name] = p
	}
	for i, n := range plan.NewNodes {
		name := fmt.Sprintf("planned-%d", i+1)
		s.nodes[name] = solver.NodeForPlan(name, problem.Region, n)
		for _, p := range n.Pods {
			s.nodeOf[p.Namespace+"/"+p.Name] = name
		}
	}
	for _, n := range problem.Nodes {
		s.nodes[n.Name] = n
	}
	for node, pods := range plan.InFlight {
		for _, p := range pods {
			s.nodeOf[p.Namespace+"/"+p.Name] = node
		}
	}
	return s
}

// render is the plan as text, for the determinism check and for failure messages.
func (s *solved) render() string {
	var b strings.Builder
	for i, n := range s.plan.NewNodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(pods)
		var types []string
		for _, it := range n.InstanceTypes {
			types = append(types, it.Name)
		}
		shown := strings.Join(types, ",")
		if len(types) > 6 {
			shown = fmt.Sprintf("%s and %d more (%x)", strings.Join(types[:6], ","), len(types)-6, sha256.Sum256([]byte(strings.Join(types, ","))))
		}
		fmt.Fprintf(&b, "planned-%d %s %s %s %s $%.4f types=%s reqs={%s} pods=%v\n", i+1, n.NodePool.Name, n.InstanceType.Name,
			n.Offering.Zone, n.Offering.CapacityType, n.Offering.Price, shown, n.Requirements, pods)
	}
	for _, node := range sortedKeys(s.plan.InFlight) {
		var pods []string
		for _, p := range s.plan.InFlight[node] {
			pods = append(pods, p.Namespace+"/"+p.Name)
		}
		sort.Strings(pods)
		fmt.Fprintf(&b, "existing %s pods=%v\n", node, pods)
	}
	var stranded []string
	for _, p := range s.problem.Pods {
		if r, ok := s.plan.Unschedulable[p.UID]; ok {
			stranded = append(stranded, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, r))
		}
	}
	sort.Strings(stranded)
	for _, u := range stranded {
		b.WriteString("unschedulable " + u + "\n")
	}
	return b.String()
}

func run(t *testing.T, sc *scenario) {
	s := solve(t, sc)
	plan := s.render()
	defer func() {
		if t.Failed() {
			t.Logf("scenario %s (%s%s)\nplan:\n%s", sc.file, sc.header.Karpenter, sc.header.Origin, plan)
		}
	}()
	// every plan: the scheduler accepts every placement, DaemonSets fit, labels stay within the NodePool's offer,
	// the same input gives the same plan, every unschedulable pod has a reason
	ctx := context.Background()
	for _, v := range solver.Verify(ctx, s.sim, s.problem.Snapshot(), s.problem.Region, s.plan, s.problem.DaemonSets) {
		t.Errorf("the scheduler would refuse: %s", v)
	}
	for i, n := range s.plan.NewNodes {
		name := fmt.Sprintf("planned-%d", i+1)
		for _, v := range labelViolations(n, s.nodes[name]) {
			t.Errorf("%s: %s", name, v)
		}
	}
	if again := solve(t, sc).render(); again != plan {
		t.Errorf("the same input gave another plan:\n%s", again)
	}
	for uid, reason := range s.plan.Unschedulable {
		if strings.TrimSpace(reason) == "" {
			t.Errorf("pod %s is unschedulable without a reason", uid)
		}
	}
	checkExpectations(t, sc.header.Expect, s)
}

// labelViolations lists the labels of a planned node its NodePool does not offer.
func labelViolations(n *solver.PlannedNode, node *corev1.Node) []string {
	pool, err := solver.NodePoolRequirements(n.NodePool)
	if err != nil {
		return []string{err.Error()}
	}
	typeLabels := n.InstanceType.Labels()
	var out []string
	for _, k := range sortedKeys(node.Labels) {
		v := node.Labels[k]
		switch {
		case k == corev1.LabelHostname:
		case k == stevedorev1.LabelNodePool && v == n.NodePool.Name:
		case k == corev1.LabelTopologyZone && v == n.Offering.Zone:
		case k == stevedorev1.LabelZoneID && v == n.Offering.ZoneID && v != "":
		case k == stevedorev1.LabelCapacityType && v == n.Offering.CapacityType:
		case k == corev1.LabelTopologyRegion:
		case scheduling.StableKey(k) != k && node.Labels[scheduling.StableKey(k)] == v:
		case typeLabels[k] == v && !scheduling.IsOfferingKey(k):
		case n.NodePool.Spec.Template.ObjectMeta.Labels[k] == v && v != "":
		case pool.Has(k) && pool[k].Has(v) && !scheduling.IsInstanceTypeKey(k) && !scheduling.IsOfferingKey(k) && k != stevedorev1.LabelZoneID:
		default:
			out = append(out, fmt.Sprintf("label %s=%s is not one NodePool %s offers", k, v, n.NodePool.Name))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// members returns the pods of a set, by namespace/name; an empty set or a name matching nothing fails the test.
func (s *solved) members(t *testing.T, set podSet, what string) []string {
	t.Helper()
	var out []string
	for _, n := range set.Names {
		key := n
		if !strings.Contains(n, "/") {
			key = "default/" + n
		}
		if _, ok := s.pods[key]; !ok {
			t.Errorf("%s: no pod %s to place in the input", what, n)
			continue
		}
		out = append(out, key)
	}
	if set.Selector != "" {
		sel, err := labels.Parse(set.Selector)
		if err != nil {
			t.Errorf("%s: selector %q: %v", what, set.Selector, err)
			return nil
		}
		for _, key := range sortedKeys(s.pods) {
			if sel.Matches(labels.Set(s.pods[key].Labels)) {
				out = append(out, key)
			}
		}
	}
	if len(out) == 0 {
		t.Errorf("%s: the set %+v names no pod", what, set)
	}
	return out
}

func checkExpectations(t *testing.T, e expect, s *solved) {
	want := map[string]bool{}
	for _, n := range e.Unschedulable {
		key := n
		if !strings.Contains(n, "/") {
			key = "default/" + n
		}
		if _, ok := s.pods[key]; !ok {
			t.Errorf("unschedulable: no pod %s to place in the input", n)
		}
		want[key] = true
	}
	for _, key := range sortedKeys(s.pods) {
		_, got := s.plan.Unschedulable[s.pods[key].UID]
		switch {
		case got && !want[key]:
			t.Errorf("pod %s is unschedulable (%s), want it placed", key, s.plan.Unschedulable[s.pods[key].UID])
		case !got && want[key]:
			t.Errorf("pod %s is placed on %s, want it unschedulable", key, s.nodeOf[key])
		}
	}
	count := len(s.plan.NewNodes)
	if e.Nodes != nil && count != *e.Nodes {
		t.Errorf("%d new nodes, want %d", count, *e.Nodes)
	}
	if e.MinNodes != nil && count < *e.MinNodes {
		t.Errorf("%d new nodes, want at least %d", count, *e.MinNodes)
	}
	if e.MaxNodes != nil && count > *e.MaxNodes {
		t.Errorf("%d new nodes, want at most %d", count, *e.MaxNodes)
	}
	for _, le := range e.NodeLabels {
		for _, key := range s.members(t, le.podSet, "nodeLabels") {
			node := s.nodes[s.nodeOf[key]]
			if node == nil {
				t.Errorf("nodeLabels: pod %s has no node", key)
				continue
			}
			l := node.Labels
			for k, v := range le.Equal {
				if l[k] != v {
					t.Errorf("pod %s's node has %s=%q, want %q", key, k, l[k], v)
				}
			}
			for k, vs := range le.In {
				if v, ok := l[k]; !ok || !contains(vs, v) {
					t.Errorf("pod %s's node has %s=%q, want one of %v", key, k, l[k], vs)
				}
			}
			for k, vs := range le.NotIn {
				if v, ok := l[k]; ok && contains(vs, v) {
					t.Errorf("pod %s's node has %s=%q, want none of %v", key, k, v, vs)
				}
			}
			for _, k := range le.Exists {
				if _, ok := l[k]; !ok {
					t.Errorf("pod %s's node has no label %s", key, k)
				}
			}
			for _, k := range le.Absent {
				if v, ok := l[k]; ok {
					t.Errorf("pod %s's node has %s=%q, want no such label", key, k, v)
				}
			}
		}
	}
	for _, set := range e.SameNode {
		nodes := map[string]bool{}
		for _, key := range s.members(t, set, "sameNode") {
			nodes[s.nodeOf[key]] = true
		}
		if len(nodes) > 1 {
			t.Errorf("sameNode %+v: the pods are on %d nodes (%v)", set, len(nodes), sortedKeys(nodes))
		}
	}
	for _, set := range e.DistinctNodes {
		seen := map[string]string{}
		for _, key := range s.members(t, set, "distinctNodes") {
			n := s.nodeOf[key]
			if n == "" {
				continue
			}
			if other, ok := seen[n]; ok {
				t.Errorf("distinctNodes %+v: %s and %s share %s", set, other, key, n)
			}
			seen[n] = key
		}
	}
	for _, sp := range e.Spread {
		counts := map[string]int{}
		for _, key := range s.members(t, sp.podSet, "spread") {
			if node := s.nodes[s.nodeOf[key]]; node != nil {
				if d, ok := node.Labels[sp.Key]; ok {
					counts[d]++
				}
			}
		}
		lo, hi := -1, 0
		for _, c := range counts {
			if lo < 0 || c < lo {
				lo = c
			}
			hi = max(hi, c)
		}
		if sp.MaxSkew != nil && len(counts) > 0 && hi-lo > *sp.MaxSkew {
			t.Errorf("spread over %s of %+v: %v, skew %d, want at most %d", sp.Key, sp.podSet, counts, hi-lo, *sp.MaxSkew)
		}
		if sp.Domains != nil && len(counts) != *sp.Domains {
			t.Errorf("spread over %s of %+v: %d domains %v, want %d", sp.Key, sp.podSet, len(counts), counts, *sp.Domains)
		}
	}
	for _, it := range e.InstanceTypes {
		for _, key := range s.members(t, it.podSet, "instanceTypes") {
			node := s.nodes[s.nodeOf[key]]
			if node == nil {
				t.Errorf("instanceTypes: pod %s has no node", key)
				continue
			}
			got := node.Labels[corev1.LabelInstanceTypeStable]
			if len(it.In) > 0 && !contains(it.In, got) {
				t.Errorf("pod %s's node is a %s, want one of %v", key, got, it.In)
			}
			if contains(it.NotIn, got) {
				t.Errorf("pod %s's node is a %s, want none of %v", key, got, it.NotIn)
			}
		}
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
