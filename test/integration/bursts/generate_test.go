/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bursts

import (
	"fmt"
	"math/rand/v2"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// burst is one generated mix of NodePools, Deployments and DaemonSets, applied at once. The same seed gives the
// same burst.
type burst struct {
	seed      uint64
	isolation string
	pools     []*stevedorev1.NodePool
	workloads []*appsv1.Deployment
	daemons   []*appsv1.DaemonSet
	// restartAfter, when not zero, is when after the apply the scheduler is stopped; restartGap how long it stays
	// down.
	restartAfter, restartGap float64
	// story says in words what was generated, for a failure's log.
	story []string
}

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// generate draws a burst from seed: in one burst of four the placement mix (see placementMix), otherwise one to
// three NodePools (weights, taints, architectures, capacity types,
// zones, minValues), three to six Deployments (plain, zone spread within a node affinity and with minDomains,
// hostname spread, self anti-affinity, pod affinity to another Deployment of the burst, preferences, pool
// selection and tolerations), up to two DaemonSets pinned to an architecture or a zone, and a scheduler restart
// in one burst out of four.
func generate(seed uint64, ns string, onlyPlacementMix bool) *burst {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := &burst{seed: seed, isolation: fmt.Sprintf("burst-%d", seed)}
	g := &generator{r: r, b: b, ns: ns}
	if r.IntN(4) == 0 || onlyPlacementMix {
		g.placementMix()
	} else {
		g.pools()
		g.workloads()
		g.daemonSets()
	}
	if r.IntN(4) == 0 {
		b.restartAfter = 0.5 + 3*r.Float64()
		b.restartGap = 2 * r.Float64()
		b.say("scheduler restarted %.1fs after the apply, down %.1fs", b.restartAfter, b.restartGap)
	}
	return b
}

type generator struct {
	r  *rand.Rand
	b  *burst
	ns string
	// tainted names the NodePools with a dedicated taint (pool name -> taint value).
	tainted map[string]string
}

func (b *burst) say(format string, args ...any) {
	b.story = append(b.story, fmt.Sprintf(format, args...))
}

func (g *generator) pick(options ...string) string { return options[g.r.IntN(len(options))] }

func (g *generator) pools() {
	g.tainted = map[string]string{}
	n := 1 + g.r.IntN(3)
	for i := range n {
		name := fmt.Sprintf("%s-p%d", g.b.isolation, i)
		np := harness.NewNodePool(name, g.b.isolation, func(np *stevedorev1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels["pool"] = name
		})
		var traits []string
		if i > 0 { // the first NodePool takes any pod of the burst; the others narrow
			if g.r.IntN(2) == 0 {
				w := 1 + g.r.Int32N(100)
				np.Spec.Weight = &w
				traits = append(traits, fmt.Sprintf("weight %d", w))
			}
			if g.r.IntN(3) == 0 {
				arch := g.pick("arm64", "amd64")
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					harness.Req(corev1.LabelArchStable, "In", arch))
				traits = append(traits, "arch "+arch)
			}
			if g.r.IntN(3) == 0 {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand"))
				traits = append(traits, "on-demand")
			}
			if g.r.IntN(3) == 0 {
				z := []string{zones[0], zones[1+g.r.IntN(2)]}
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					harness.Req(corev1.LabelTopologyZone, "In", z...))
				traits = append(traits, "zones "+strings.Join(z, ","))
			}
			if g.r.IntN(3) == 0 {
				mv := 2 + g.r.IntN(2)
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					stevedorev1.NodeSelectorRequirementWithMinValues{Key: stevedorev1.LabelInstanceFamily, Operator: "Exists", MinValues: &mv})
				traits = append(traits, fmt.Sprintf("minValues %d families", mv))
			}
			if g.r.IntN(3) == 0 {
				g.tainted[name] = "team-" + fmt.Sprint(i)
				np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints,
					corev1.Taint{Key: "dedicated", Value: g.tainted[name], Effect: corev1.TaintEffectNoSchedule})
				traits = append(traits, "taint dedicated="+g.tainted[name])
			}
		}
		g.b.pools = append(g.b.pools, np)
		g.b.say("NodePool %s: %s", name, strings.Join(append(traits, "any"), ", "))
	}
}

func (g *generator) workloads() {
	n := 3 + g.r.IntN(4)
	for i := range n {
		name := fmt.Sprintf("w%d", i)
		replicas := 1 + g.r.Int32N(5)
		cpu := g.pick("250m", "500m", "1", "2")
		mem := g.pick("256Mi", "1Gi", "2Gi")
		d := harness.Deployment(g.ns, name, replicas, cpu, mem)
		spec := &d.Spec.Template.Spec
		pod := harness.Isolated(&corev1.Pod{Spec: *spec}, g.b.isolation)
		*spec = pod.Spec
		kind := g.r.IntN(7)
		var traits []string
		switch kind {
		case 1:
			traits = append(traits, g.zoneSpread(name, spec))
		case 2:
			spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: appSelector(name)}}
			traits = append(traits, "hostname spread maxSkew 1")
		case 3:
			spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: appSelector(name), TopologyKey: corev1.LabelHostname}}}}
			traits = append(traits, "one per node (anti-affinity)")
		case 4:
			if i > 0 {
				target := fmt.Sprintf("w%d", g.r.IntN(i))
				key := g.pick(corev1.LabelHostname, corev1.LabelTopologyZone)
				spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
					{LabelSelector: appSelector(target), TopologyKey: key}}}}
				traits = append(traits, "affinity to "+target+" by "+key)
			}
		case 5:
			arch := g.pick("arm64", "amd64")
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}}}}}}
			traits = append(traits, "prefers "+arch)
		}
		if g.r.IntN(4) == 0 && len(g.b.pools) > 1 {
			pool := g.b.pools[1+g.r.IntN(len(g.b.pools)-1)].Name
			spec.NodeSelector["pool"] = pool
			traits = append(traits, "selects "+pool)
		}
		for pool, value := range g.tainted {
			if g.r.IntN(2) == 0 || spec.NodeSelector["pool"] == pool {
				spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual,
					Value: value, Effect: corev1.TaintEffectNoSchedule})
				traits = append(traits, "tolerates "+pool)
			}
		}
		g.b.workloads = append(g.b.workloads, d)
		if len(traits) == 0 {
			traits = []string{"plain"}
		}
		g.b.say("Deployment %s: %d x cpu %s memory %s, %s", name, replicas, cpu, mem, strings.Join(traits, ", "))
	}
}

// zoneSpread gives spec a hard zone spread, sometimes within a node affinity allowing two zones (with either node
// affinity policy) and sometimes with minDomains.
func (g *generator) zoneSpread(name string, spec *corev1.PodSpec) string {
	c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: appSelector(name)}
	what := "zone spread maxSkew 1"
	if g.r.IntN(2) == 0 {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones[:2]}}}}}}}
		policy := corev1.NodeInclusionPolicy(g.pick(string(corev1.NodeInclusionPolicyHonor), string(corev1.NodeInclusionPolicyIgnore)))
		c.NodeAffinityPolicy = &policy
		what += " within 2 zones, nodeAffinityPolicy " + string(policy)
	}
	if g.r.IntN(3) == 0 {
		md := int32(2)
		c.MinDomains = &md
		what += ", minDomains 2"
	}
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
	return what
}

func (g *generator) daemonSets() {
	for i := range g.r.IntN(3) {
		name := fmt.Sprintf("ds%d", i)
		selector := map[string]string{harness.IsolationKey: g.b.isolation}
		what := "every node"
		switch g.r.IntN(3) {
		case 0:
			arch := g.pick("arm64", "amd64")
			selector[corev1.LabelArchStable] = arch
			what = arch + " nodes"
		case 1:
			zone := zones[g.r.IntN(len(zones))]
			selector[corev1.LabelTopologyZone] = zone
			what = "nodes in " + zone
		}
		cpu := g.pick("100m", "250m", "500m")
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.ns},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{NodeSelector: selector, TerminationGracePeriodSeconds: new(int64),
						Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
						Containers: []corev1.Container{{Name: "agent", Image: "agent", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}}}}
		g.b.daemons = append(g.b.daemons, ds)
		g.b.say("DaemonSet %s: %s cpu on %s", name, cpu, what)
	}
}

func appSelector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// placementMix is the mix a user tried first: a web Deployment with required pod affinity to a cache pod pending at
// the same time, six replicas spread by zone inside a node affinity allowing two zones, an arm64-only DaemonSet,
// 1-CPU pods of any architecture, and a NodePool chosen by a label with minValues 3 on the instance families.
func (g *generator) placementMix() {
	general := harness.NewNodePool(g.b.isolation+"-general", g.b.isolation)
	diverse := harness.NewNodePool(g.b.isolation+"-diverse", g.b.isolation, func(np *stevedorev1.NodePool) {
		np.Spec.Template.ObjectMeta.Labels["pool"] = "diverse"
		mv := 3
		np.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
			{Key: stevedorev1.LabelInstanceFamily, Operator: "Exists", MinValues: &mv}}
	})
	g.b.pools = append(g.b.pools, general, diverse)
	deployment := func(name string, replicas int32, cpu string, mutate func(*corev1.PodSpec)) {
		d := harness.Deployment(g.ns, name, replicas, cpu, "512Mi")
		spec := &d.Spec.Template.Spec
		*spec = harness.Isolated(&corev1.Pod{Spec: *spec}, g.b.isolation).Spec
		if mutate != nil {
			mutate(spec)
		}
		g.b.workloads = append(g.b.workloads, d)
	}
	deployment("cache", 2, "250m", nil)
	deployment("web", 2, "250m", func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: appSelector("cache"), TopologyKey: corev1.LabelHostname}}}}
	})
	deployment("spread", 6, "500m", func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones[:2]}}}}}}}
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: appSelector("spread")}}
	})
	deployment("worker", 4, "1", nil)
	deployment("batch", 3, "500m", func(spec *corev1.PodSpec) { spec.NodeSelector["pool"] = "diverse" })
	g.b.daemons = append(g.b.daemons, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "arm64-agent", Namespace: g.ns},
		Spec: appsv1.DaemonSetSpec{Selector: appSelector("arm64-agent"),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "arm64-agent"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelArchStable: "arm64", harness.IsolationKey: g.b.isolation},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{Name: "agent", Image: "agent", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}}})
	g.b.say("the placement mix: cache 2 and web 2 (affinity to cache by hostname), spread 6 by zone within 2 zones, " +
		"worker 4 x 1 cpu, batch 3 on a NodePool with minValues 3 families, an arm64-only DaemonSet of 1 cpu")
}
