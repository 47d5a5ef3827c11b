/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// cronParser reads budget schedules: five fields (minute hour day-of-month month day-of-week) or a descriptor
// such as @daily, in UTC.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allowedDisruptions returns how many of a NodePool's nodes may be disrupted at once for a reason now: the most
// restrictive active budget that applies to the reason (a percentage of total rounds up). A budget whose schedule
// cannot be parsed allows nothing, so a typo never lets disruption run unbounded.
func allowedDisruptions(np *stevedorev1.NodePool, reason stevedorev1.DisruptionReason, total int, now time.Time) (int, error) {
	allowed := math.MaxInt
	var firstErr error
	for _, b := range np.Spec.Disruption.Budgets {
		if !appliesTo(b, reason) {
			continue
		}
		active, err := budgetActive(b, now)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			allowed = 0
			continue
		}
		if !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, total)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			allowed = 0
			continue
		}
		allowed = min(allowed, n)
	}
	return allowed, firstErr
}

func appliesTo(b stevedorev1.Budget, reason stevedorev1.DisruptionReason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, r := range b.Reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// budgetActive reports whether a budget applies now: always without a schedule, else within duration after the
// latest time its schedule fired.
func budgetActive(b stevedorev1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("budget schedule %q has no duration", *b.Schedule)
	}
	sched, err := cronParser.Parse(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("budget schedule %q: %w", *b.Schedule, err)
	}
	now = now.UTC()
	d := b.Duration.Duration
	// The latest firing at or before now, if it is within d, is the one that could keep the budget active: start
	// looking just before now-d.
	next := sched.Next(now.Add(-d).Add(-time.Second))
	return !next.After(now) && now.Before(next.Add(d)), nil
}

// budgetNodes reads a budget's nodes: a count, or a percentage of total rounded up.
func budgetNodes(nodes string, total int) (int, error) {
	if pct, ok := strings.CutSuffix(nodes, "%"); ok {
		v, err := strconv.Atoi(pct)
		if err != nil || v < 0 || v > 100 {
			return 0, fmt.Errorf("budget nodes %q: not a percentage", nodes)
		}
		return int(math.Ceil(float64(v) * float64(total) / 100)), nil
	}
	v, err := strconv.Atoi(nodes)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("budget nodes %q: not a count", nodes)
	}
	return v, nil
}

// budgets tracks, per NodePool, how many more nodes a pass may disrupt for a reason.
type budgets struct {
	v      *clusterView
	reason stevedorev1.DisruptionReason
	left   map[string]int
}

func newBudgets(ctx context.Context, v *clusterView, reason stevedorev1.DisruptionReason) *budgets {
	b := &budgets{v: v, reason: reason, left: map[string]int{}}
	for name, ps := range v.pools {
		allowed, err := allowedDisruptions(ps.pool, reason, ps.total, v.now)
		if err != nil {
			klog.FromContext(ctx).Error(err, "NodePool disruption budget is invalid; nothing is disrupted under it", "nodepool", name)
		}
		b.left[name] = max(0, allowed-ps.disrupting)
	}
	return b
}

// take reserves room for one node of the candidate's NodePool.
func (b *budgets) take(cand *Candidate) bool {
	name := cand.NodePool.Name
	if b.left[name] <= 0 {
		return false
	}
	b.left[name]--
	return true
}
