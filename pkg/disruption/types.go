/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

const (
	// maxMultiNodeCandidates bounds the nodes one multi-node consolidation considers (one simulation each).
	maxMultiNodeCandidates = 100
	// minSpotToSpotTypes is how many cheaper spot types a spot-to-spot replacement must be able to choose from,
	// so that it does not land in a pool about to be reclaimed.
	minSpotToSpotTypes = 15
)

// savingsEpsilon is the smallest hourly saving that counts: prices differ by more, float sums by less.
const savingsEpsilon = 1e-9

// Method is one way of finding nodes to disrupt; a pass tries the methods in order and carries out the first
// command one finds.
type Method interface {
	// Name is the method's name in logs, events and metrics.
	Name() string
	// Find returns one command for the cluster as v shows it, or nil.
	Find(ctx context.Context, v *clusterView) (*Command, error)
	// Validated reports whether the command waits disruptionValidationDelay and is checked again before it is carried out
	// (pods move in the meantime).
	Validated() bool
	// StillHolds reports, at validation, whether a candidate of the command still qualifies.
	StillHolds(cand *Candidate, now time.Time) bool
	// Resimulate reports whether validation must also find the command's pods a place again (the method then
	// is a consolidator).
	Resimulate() bool
}

// consolidator answers whether removing nodes saves money, and with which command (the consolidation methods).
type consolidator interface {
	consolidate(ctx context.Context, v *clusterView, cands []*Candidate) (*Command, *verdict, error)
}

// Command is what one pass does: remove some nodes, launching replacements first.
type Command struct {
	Method string
	Reason stevedorev1.DisruptionReason
	// Forceful commands (expiry) are not budgeted and go ahead even when a replacement fails.
	Forceful     bool
	Candidates   []*Candidate
	Replacements []*solver.PlannedNode
	// Pods that move.
	Pods int
	// Placements say where the simulation put each moving pod, by pod UID (surged pods' successors are nominated
	// there); nil when the command simulated none.
	Placements map[types.UID]Placement
	// ReplacementWait overrides how long replacements may take to become ready (nil: registrationTimeout; zero or
	// less: do not wait).
	ReplacementWait *time.Duration
	// DrainTimeout, when positive, bounds the drain of the command's nodes (their pods are deleted after it).
	DrainTimeout time.Duration
	// Evict says the command's pods are evicted, never surged: the node is going (interruption, repair).
	Evict bool
	// Scores are the move's scores for the Balanced NodePools among its nodes'.
	Scores    []poolScore
	evaluated time.Duration
}

// Placement is where a command planned a moving pod: an existing node, or one of its replacements.
type Placement struct {
	// Node names the existing node ("" for a replacement).
	Node string
	// Replacement indexes Command.Replacements (when Node is "").
	Replacement int
}

// placements reads where a removal's plan puts each pod: on the other nodes (by name) or on its new nodes (by
// index, which the command's replacements keep).
func placements(r *provision.Removal) map[types.UID]Placement {
	out := map[types.UID]Placement{}
	for node, pods := range r.Plan.InFlight {
		for _, pod := range pods {
			out[pod.UID] = Placement{Node: node}
		}
	}
	for i, pn := range r.Plan.NewNodes {
		for _, pod := range pn.Pods {
			out[pod.UID] = Placement{Replacement: i}
		}
	}
	return out
}

// Savings is the hourly price of the nodes removed minus that of their replacements.
func (cmd *Command) Savings() float64 {
	s := 0.0
	for _, c := range cmd.Candidates {
		s += c.Price
	}
	for _, r := range cmd.Replacements {
		s -= r.Offering.Price
	}
	return s
}

// nodes names the command's nodes (none for a nil command).
func (cmd *Command) nodes() map[string]bool {
	out := map[string]bool{}
	if cmd == nil {
		return out
	}
	for _, c := range cmd.Candidates {
		out[c.Node.Name] = true
	}
	return out
}

// Action is "delete" or "replace".
func (cmd *Command) Action() string {
	if len(cmd.Replacements) > 0 {
		return "replace"
	}
	return "delete"
}

func (cmd *Command) String() string {
	var names []string
	for _, c := range cmd.Candidates {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

func sortedNames(cands []*Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node.Name
	}
	sort.Strings(out)
	return out
}

func describeReplacements(rs []*solver.PlannedNode) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s/%s/%s $%.4f/h", r.InstanceType.Name, r.Offering.Zone, r.Offering.CapacityType, r.Offering.Price))
	}
	return strings.Join(parts, ", ")
}
