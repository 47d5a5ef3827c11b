/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Gang is an all-or-nothing group of pods: a training job's workers, which are useless unless at least MinMember
// of them run at once. The solver plans a gang's pods only if, counted with the members placed already, at least
// MinMember of them get a node; otherwise it plans none of them, so no node is launched for a part of a gang.
type Gang struct {
	// Name names the gang in the reasons given to its pods (namespace/name of its PodGroup).
	Name string
	// MinMember is how many of the gang's pods must be placed at once.
	MinMember int
	// Placed counts the members that have a node already (bound, binding, or planned by an earlier solve).
	Placed int
	// Pods are the members among Input.Pods.
	Pods []types.UID
}

// solveGangs plans the input with its gangs whole or not at all: it solves, takes out every gang left short of
// its MinMember (the plan's placements undone) and solves again without their pods, until no gang is short. Each
// round takes out at least one gang, so there are at most len(Gangs)+1 solves; taking a gang out only frees room,
// so a gang whole in one round stays whole in the next unless a constraint between pods ties it to one taken out.
func (s *Solver) solveGangs(ctx context.Context, in Input) (*Plan, error) {
	start := time.Now()
	gangs := append([]Gang(nil), in.Gangs...)
	sort.SliceStable(gangs, func(i, j int) bool { return gangs[i].Name < gangs[j].Name })
	left := map[types.UID]string{}
	attempts := 0
	for {
		plan, err := s.solveOnce(ctx, in)
		if err != nil {
			return nil, err
		}
		attempts += plan.Attempts
		short := shortGangs(gangs, plan)
		if len(short) == 0 {
			for uid, why := range left {
				plan.Unschedulable[uid] = why
			}
			plan.Attempts = attempts
			plan.Duration = time.Since(start)
			return plan, nil
		}
		// the placements on in-flight nodes stay in the snapshot after a solve (its new nodes do not)
		for node, pods := range plan.InFlight {
			for _, p := range pods {
				_ = in.Snapshot.RemovePod(node, p)
			}
		}
		out, outGangs := map[types.UID]bool{}, map[string]bool{}
		for _, g := range short {
			outGangs[g.gang.Name] = true
			why := g.reason(plan)
			for _, uid := range g.gang.Pods {
				out[uid] = true
				left[uid] = why
			}
		}
		kept := in.Pods[:0:0]
		for _, p := range in.Pods {
			if !out[p.UID] {
				kept = append(kept, p)
			}
		}
		in.Pods = kept
		keptGangs := gangs[:0:0]
		for _, g := range gangs {
			if !outGangs[g.Name] {
				keptGangs = append(keptGangs, g)
			}
		}
		gangs = keptGangs
	}
}

// shortGang is a gang a plan left short, with how many of its pods the plan placed.
type shortGang struct {
	gang   Gang
	placed int
}

// reason says why none of the gang's pods is planned, with the reason one of them got no node.
func (g shortGang) reason(plan *Plan) string {
	why := fmt.Sprintf("gang %s needs %d pods placed at once and only %d can be", g.gang.Name, g.gang.MinMember,
		g.gang.Placed+g.placed)
	for _, uid := range g.gang.Pods {
		if own, ok := plan.Unschedulable[uid]; ok {
			return why + "; another of its pods: " + own
		}
	}
	return why
}

// shortGangs returns the gangs, in name order, that the plan places fewer than MinMember of (counting those
// placed already). A gang with no pod in the input has nothing to plan and is never short.
func shortGangs(gangs []Gang, plan *Plan) []shortGang {
	placed := map[types.UID]bool{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			placed[p.UID] = true
		}
	}
	for _, pods := range plan.InFlight {
		for _, p := range pods {
			placed[p.UID] = true
		}
	}
	var out []shortGang
	for _, g := range gangs {
		if len(g.Pods) == 0 {
			continue
		}
		n := 0
		for _, uid := range g.Pods {
			if placed[uid] {
				n++
			}
		}
		if g.Placed+n < g.MinMember {
			out = append(out, shortGang{gang: g, placed: n})
		}
	}
	return out
}
