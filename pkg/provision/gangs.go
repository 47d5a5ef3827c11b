/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// podGangs is the gang of each pod that is in one, by UID: a batch works it out once (gangsOf) for its partners,
// its gangs, the gangs left short and its launch groups.
type podGangs map[types.UID]gang.Key

// gangsOf works out the gangs of the pods of every group.
func gangsOf(groups ...[]*corev1.Pod) podGangs {
	out := podGangs{}
	for _, pods := range groups {
		for _, pod := range pods {
			if key, ok := gang.Of(pod); ok {
				out[pod.UID] = key
			}
		}
	}
	return out
}

// same reports whether two pods are of one gang.
func (g podGangs) same(a, b *corev1.Pod) bool {
	ka, ok := g[a.UID]
	if !ok {
		return false
	}
	kb, ok := g[b.UID]
	return ok && ka == kb
}

// anyOf reports whether one of the pods is in a gang.
func (g podGangs) anyOf(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if _, ok := g[pod.UID]; ok {
			return true
		}
	}
	return false
}

// sole returns the gang all the pods belong to; ok is false when one is in none or in another.
func (g podGangs) sole(pods []*corev1.Pod) (gang.Key, bool) {
	var key gang.Key
	for i, pod := range pods {
		k, ok := g[pod.UID]
		if !ok || (i > 0 && k != key) {
			return gang.Key{}, false
		}
		key = k
	}
	return key, len(pods) > 0
}

// batchGangs are the gangs among a batch's pods, for the solver to plan whole or not at all (solver), with the key
// of each (keys[i] is solver[i]'s).
type batchGangs struct {
	solver []solver.Gang
	keys   []gang.Key
}

// gangs returns the gangs among the pods to solve (their gangs worked out in of), each with the members placed
// already (bound, binding, or planned by an earlier solve). A pod whose gang has no PodGroup is left out of the
// solve, with the reason, in refused.
func (p *Provisioner) gangs(ctx context.Context, pods []*corev1.Pod, of podGangs) (gangs batchGangs, refused map[types.UID]string) {
	byKey := map[gang.Key][]types.UID{}
	for _, pod := range pods {
		if key, ok := of[pod.UID]; ok {
			byKey[key] = append(byKey[key], pod.UID)
		}
	}
	if len(byKey) == 0 {
		return batchGangs{}, nil
	}
	in := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		in[pod.UID] = true
	}
	keys := make([]gang.Key, 0, len(byKey))
	for key := range byKey {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	refused = map[types.UID]string{}
	for _, key := range keys {
		g, isGang, err := p.gangOf(key, byKey[key], in)
		if err != nil {
			for _, uid := range byKey[key] {
				refused[uid] = err.Error()
			}
			continue
		}
		if !isGang {
			continue // a Workload API group of the basic policy: its pods are planned one by one
		}
		klog.FromContext(ctx).V(2).Info("Planning a gang whole or not at all", "gang", key, "minMember", g.MinMember,
			"inBatch", len(g.Pods), "placedAlready", g.Placed)
		gangs.solver = append(gangs.solver, g)
		gangs.keys = append(gangs.keys, key)
	}
	return gangs, refused
}

// gangOf returns the gang of key with its pods among those solved (in), and the members placed already; isGang is
// false for a group whose policy is not a gang.
func (p *Provisioner) gangOf(key gang.Key, pods []types.UID, in map[types.UID]bool) (g solver.Gang, isGang bool, err error) {
	need, isGang, err := gang.Need(p.opts.Gangs, p.opts.WorkloadGroups, key)
	if err != nil || !isGang {
		return solver.Gang{}, false, err
	}
	members, err := gang.Members(p.opts.Pods, key)
	if err != nil {
		return solver.Gang{}, false, err
	}
	placed := 0
	for _, m := range members {
		if !in[m.UID] && gang.Live(m) && (m.Spec.NodeName != "" || p.plans.Held(m.UID)) {
			placed++
		}
	}
	return solver.Gang{Name: key.String(), MinMember: need, Placed: placed, Pods: pods}, true, nil
}

// releaseShortGangs gives back the NodeClaims held for a gang that the solve left short: members planned by an
// earlier solve whose siblings' launch failed (no capacity) would keep nodes running that cannot serve the gang.
// Only NodeClaims holding nothing but the gang's pods are deleted, and only while no pod of the gang is bound (a
// gang that runs keeps its nodes; the member it misses waits for room). The members are planned again, all
// together, once the NodeClaims are gone (the ledger wakes them).
func (p *Provisioner) releaseShortGangs(ctx context.Context, gangs batchGangs, unschedulable map[types.UID]string) {
	for i, g := range gangs.solver {
		if g.Placed > 0 && len(g.Pods) > 0 && leftOut(g, unschedulable) {
			p.releaseGang(ctx, g, gangs.keys[i])
		}
	}
}

// leftOut reports whether the solve left the gang's pods unplanned.
func leftOut(g solver.Gang, unschedulable map[types.UID]string) bool {
	for _, uid := range g.Pods {
		if _, out := unschedulable[uid]; out {
			return true
		}
	}
	return false
}

// releaseGang deletes the NodeClaims that hold nothing but the gang's pods, unless a pod of the gang runs.
func (p *Provisioner) releaseGang(ctx context.Context, g solver.Gang, key gang.Key) {
	logger := klog.FromContext(ctx)
	members, err := gang.Members(p.opts.Pods, key)
	if err != nil {
		return
	}
	member := map[types.UID]bool{}
	claims := map[string]bool{}
	for _, m := range members {
		if m.Spec.NodeName != "" && gang.Live(m) {
			logger.V(2).Info("Gang short of pods keeps its nodes: some of its pods run", "gang", g.Name)
			return
		}
		member[m.UID] = true
		if claim, ok := p.plans.ClaimOf(m.UID); ok {
			claims[claim] = true
		}
	}
	for _, claim := range slices.Sorted(maps.Keys(claims)) {
		onlyGang := true
		for _, pod := range p.plans.Pods(claim) {
			onlyGang = onlyGang && member[pod.UID]
		}
		if !onlyGang {
			continue
		}
		err := p.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, claim, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Releasing a NodeClaim of a gang that cannot be placed whole failed", "nodeclaim", claim, "gang", g.Name)
			continue
		}
		metrics.GangNodeClaimsReleased.Inc()
		logger.Info("Released a NodeClaim of a gang that cannot be placed whole", "nodeclaim", claim, "gang", g.Name,
			"minMember", g.MinMember)
	}
}

// launchGroups returns, for each planned node (by index), the AnnotationLaunchGroup value that makes it launch
// with its gang's other nodes of the same shape in one all-or-nothing fleet, or "" for none. A node takes part
// when all its pods are of one gang (of says which).
func launchGroups(nodes []*solver.PlannedNode, now time.Time, of podGangs) []string {
	return groupsByShape(nodes, now, func(pn *solver.PlannedNode) (string, bool) {
		key, ok := of.sole(pn.Pods)
		return key.String(), ok
	})
}

// groupsByShape returns, for each planned node (by index), the AnnotationLaunchGroup value that makes it launch
// with the other nodes of its group (groupOf; false for none) and shape in one all-or-nothing fleet, or "" for
// none. A node's shape is its NodePool and the requirements its NodeClaim will carry (the fleets of equal
// NodeClaims are equal). A shape of one node is no group. Group ids are unique per solve (now), so a later
// solve's NodeClaims never wait for an earlier one's.
func groupsByShape(nodes []*solver.PlannedNode, now time.Time, groupOf func(*solver.PlannedNode) (string, bool)) []string {
	out := make([]string, len(nodes))
	members := map[string][]int{}
	var order []string
	for i, pn := range nodes {
		owner, ok := groupOf(pn)
		if !ok {
			continue
		}
		claim := NewNodeClaim(pn, "")
		shape, err := json.Marshal(claim.Spec.Requirements)
		if err != nil {
			continue
		}
		group := owner + "|" + pn.NodePool.Name + "|" + claim.Annotations[stevedorev1.AnnotationLaunchOrder] + "|" + string(shape)
		if _, seen := members[group]; !seen {
			order = append(order, group)
		}
		members[group] = append(members[group], i)
	}
	for _, group := range order {
		idx := members[group]
		if len(idx) < 2 {
			continue
		}
		sum := sha256.Sum256([]byte(group + "|" + strconv.FormatInt(now.UnixNano(), 10)))
		value := stevedorev1.FormatLaunchGroup(hex.EncodeToString(sum[:8]), len(idx))
		for _, i := range idx {
			out[i] = value
		}
	}
	return out
}
