/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// wakeups brings the plan made before a restart or a change of leader back (AdoptNominations): until it has, the
// nodes still coming up are refused to every pod, and the pods refused meanwhile are woken once it has. It then
// reviews the pods parked on the ready nodes planned for them (reviewParked), and records how long they waited.
type wakeups struct {
	*base

	// started is set once the plan of a previous leader has been adopted (AdoptNominations); until then the nodes
	// Stevedore is bringing up are refused to every pod (heldAtStart), which is woken once it is set.
	started     atomic.Bool
	mu          sync.Mutex
	heldAtStart map[types.UID]*corev1.Pod
}

func newWakeups(b *base) *wakeups {
	return &wakeups{base: b, heldAtStart: map[types.UID]*corev1.Pod{}}
}

// adoptNominations plans on their NodeClaim the pending pods of this scheduler that a NodeClaim still coming up was
// launched for: after a restart or a change of leader, the plan made before lives on only in the pods'
// status.nominatedNodeName and in the NodeClaims' planned-pods annotation (a nomination wins; of two NodeClaims
// listing a pod, the newer). Without it the first solve would see those nodes empty, and the scheduler would put
// other pods into their room; the planned pods would then find no room, or a spread broken by the pods put in
// their place, and get nodes of their own. The pods adopted from the annotation are nominated to their node once
// it has a name.
func (p *wakeups) adoptNominations(ctx context.Context, pods []*corev1.Pod, claims []*stevedorev1.NodeClaim) {
	coming, claimOfNode := comingClaims(claims)
	if len(coming) == 0 {
		return
	}
	plan := p.previousPlan(pods, coming, claimOfNode)
	adopted, toNominate, nominated := p.adopt(plan)
	for _, c := range coming {
		if ps := adopted[c.Name]; len(ps) > 0 {
			p.plans.Plan(ctx, c.Name, ps)
			klog.FromContext(ctx).V(1).Info("Adopted the pods planned on a node coming up", "nodeclaim", c.Name, "pods", len(ps))
		}
		if uids := nominated[c.Name]; len(uids) > 0 {
			p.plans.Nominate(c.Name, c.Status.NodeName, uids...)
		}
		if ps := toNominate[c.Name]; len(ps) > 0 {
			p.nominate(ctx, c, ps)
		}
	}
}

// comingClaims returns the NodeClaims whose node is still coming up, oldest first (so that a newer NodeClaim
// listing the same pod, planned again, wins), and those with a node name by it.
func comingClaims(claims []*stevedorev1.NodeClaim) ([]*stevedorev1.NodeClaim, map[string]*stevedorev1.NodeClaim) {
	var coming []*stevedorev1.NodeClaim
	claimOfNode := map[string]*stevedorev1.NodeClaim{}
	for _, c := range claims {
		if c.DeletionTimestamp == nil && !c.IsInitialized() {
			coming = append(coming, c)
			if c.Status.NodeName != "" {
				claimOfNode[c.Status.NodeName] = c
			}
		}
	}
	sort.Slice(coming, func(i, j int) bool {
		if !coming[i].CreationTimestamp.Equal(&coming[j].CreationTimestamp) {
			return coming[i].CreationTimestamp.Before(&coming[j].CreationTimestamp)
		}
		return coming[i].Name < coming[j].Name
	})
	return coming, claimOfNode
}

// plannedPod is a pending pod of the previous plan: the NodeClaim it was planned on, and whether it is nominated to
// that NodeClaim's node already.
type plannedPod struct {
	key       string
	pod       *corev1.Pod
	claim     *stevedorev1.NodeClaim
	nominated bool
}

// previousPlan reads the plan made before from the NodeClaims' planned-pods annotations and the pods' nominations
// (a nomination wins), for the pending pods of this scheduler, by pod key.
func (p *wakeups) previousPlan(pods []*corev1.Pod, coming []*stevedorev1.NodeClaim, claimOfNode map[string]*stevedorev1.NodeClaim) []plannedPod {
	pending := map[string]*corev1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Spec.SchedulerName == p.opts.SchedulerName {
			pending[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	planOf := map[string]*plannedPod{}
	for _, c := range coming {
		for _, key := range strings.Split(c.Annotations[stevedorev1.AnnotationPlannedPods], ",") {
			if pod := pending[key]; pod != nil {
				planOf[key] = &plannedPod{key: key, pod: pod, claim: c}
			}
		}
	}
	for key, pod := range pending {
		if c := claimOfNode[pod.Status.NominatedNodeName]; c != nil {
			planOf[key] = &plannedPod{key: key, pod: pod, claim: c, nominated: true}
		}
	}
	plan := make([]plannedPod, 0, len(planOf))
	for _, pp := range planOf {
		plan = append(plan, *pp)
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].key < plan[j].key })
	return plan
}

// adopt takes the pods of the previous plan this process has no plan for yet: it returns them by NodeClaim, and
// those to nominate once adopted (their NodeClaim's node has a name and they are not nominated to it yet), and those
// nominated to it already.
func (p *wakeups) adopt(plan []plannedPod) (adopted, toNominate map[string][]*corev1.Pod, nominated map[string][]types.UID) {
	adopted, toNominate, nominated = map[string][]*corev1.Pod{}, map[string][]*corev1.Pod{}, map[string][]types.UID{}
	for _, pp := range plan {
		pod, c := pp.pod, pp.claim
		if p.plans.Held(pod.UID) || p.solving.has(pod.UID) {
			continue
		}
		adopted[c.Name] = append(adopted[c.Name], pod)
		switch {
		case pp.nominated:
			nominated[c.Name] = append(nominated[c.Name], pod.UID)
		case c.Status.NodeName != "":
			toNominate[c.Name] = append(toNominate[c.Name], pod)
		}
	}
	return adopted, toNominate, nominated
}

// AdoptNominations adopts the nominations found in the cluster (see adoptNominations); the provisioner runs it when
// it starts, before its first solve. Until it has, the nodes still coming up are refused to every pod
// (startingRefusal): the room they keep for the pods planned on them is not known yet. The pods refused meanwhile
// are woken.
func (p *wakeups) AdoptNominations(ctx context.Context) {
	if pods, err := p.opts.Pods.List(labels.Everything()); err == nil {
		if claims, err := p.NodeClaims(); err == nil {
			p.adoptNominations(ctx, pods, claims)
		}
	}
	p.mu.Lock()
	p.started.Store(true)
	held := make([]*corev1.Pod, 0, len(p.heldAtStart))
	for _, pod := range p.heldAtStart {
		held = append(held, pod)
	}
	p.heldAtStart = map[types.UID]*corev1.Pod{}
	p.mu.Unlock()
	p.wake(ctx, WakeStarted, held)
}

// startingRefusal says why node cannot take pod while the provisioner has not adopted the previous leader's plan
// ("" when it can): a node Stevedore launched that is not initialized yet keeps room for pods this process does
// not know of yet.
func (p *wakeups) startingRefusal(pod *corev1.Pod, node *corev1.Node) string {
	if p.started.Load() {
		return ""
	}
	if _, ours := node.Labels[stevedorev1.LabelNodePool]; !ours {
		return ""
	}
	if name := node.Labels[stevedorev1.LabelNodeClaim]; name != "" {
		if c, err := p.opts.NodeClaims.Get(name); err == nil && c.IsInitialized() {
			return ""
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started.Load() {
		return ""
	}
	p.heldAtStart[pod.UID] = pod
	return "Stevedore is starting: the pods planned on this node, which is still coming up, are not known yet"
}
