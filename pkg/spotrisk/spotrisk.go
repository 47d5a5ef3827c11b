/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package spotrisk keeps the history of Spot interruptions, read from the interruption queue, and what it makes
// provisioning do:
//   - a Spot pool (an instance type in a zone) interrupted recently is priced higher for a while: each interruption
//     adds half the offering's price, fading to nothing over an hour, so the solver prefers other pools while EC2 is
//     taking capacity back in that one (the unavailable-offerings cache keeps it out entirely for its first minutes);
//   - a NodePool whose annotation stevedore.dev/spot-fallback says "3/30m" falls back to on-demand after 3 of its
//     Spot nodes were interrupted within 30 minutes, and goes back to Spot once 30 minutes pass without another.
//
// The history is kept in memory: a restarted scheduler starts without it.
package spotrisk

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// Window is how long an interruption raises its pool's price.
const Window = time.Hour

// PremiumPerInterruption is the share of an offering's price one interruption adds to it at first; the premium
// fades linearly to nothing over Window.
const PremiumPerInterruption = 0.5

// Annotation on a NodePool sets its fallback to on-demand: "<interruptions>/<window>".
const Annotation = stevedorev1.AnnotationSpotFallback

// Policy is a NodePool's fallback to on-demand: after Interruptions of its Spot nodes within Window, it plans
// on-demand until Window passes without another.
type Policy struct {
	Interruptions int
	Window        time.Duration
}

// ParsePolicy reads the annotation's value, such as "3/30m".
func ParsePolicy(value string) (Policy, error) {
	count, window, ok := strings.Cut(strings.TrimSpace(value), "/")
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if !ok || err != nil || n < 1 {
		return Policy{}, fmt.Errorf("%s %q: want <interruptions>/<window>, such as \"3/30m\", with 1 or more interruptions", Annotation, value)
	}
	d, err := time.ParseDuration(strings.TrimSpace(window))
	if err != nil || d <= 0 {
		return Policy{}, fmt.Errorf("%s %q: the window must be a positive duration, such as 30m", Annotation, value)
	}
	return Policy{Interruptions: n, Window: d}, nil
}

// PolicyOf returns a NodePool's fallback policy; ok is false when it has none or err says why its value is not one.
func PolicyOf(np *stevedorev1.NodePool) (p Policy, ok bool, err error) {
	v, set := np.Annotations[Annotation]
	if !set {
		return Policy{}, false, nil
	}
	p, err = ParsePolicy(v)
	return p, err == nil, err
}

// interruption is one Spot interruption notice.
type interruption struct {
	nodePool, pool string
	at             time.Time
}

// History holds the Spot interruptions of the last hours and the NodePools falling back to on-demand. It is safe for
// concurrent use.
type History struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	// seen are the interruptions still counted, oldest first.
	seen []interruption
	// fallback holds, for each NodePool falling back to on-demand, when it goes back to Spot.
	fallback map[string]time.Time
}

// NewHistory returns an empty history on clk.
func NewHistory(clk clock.PassiveClock) *History {
	return &History{clock: clk, fallback: map[string]time.Time{}}
}

// keep is how long an interruption is remembered: the longest a fallback window may usefully count it.
const keep = 24 * time.Hour

// Record notes the interruption of a Spot node of nodePool in a pool (instance type and zone).
func (h *History) Record(nodePool, instanceType, zone string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.prune(now)
	h.seen = append(h.seen, interruption{nodePool: nodePool, pool: instanceType + "/" + zone, at: now})
}

// prune forgets interruptions older than keep (h.mu held).
func (h *History) prune(now time.Time) {
	i := 0
	for i < len(h.seen) && now.Sub(h.seen[i].at) > keep {
		i++
	}
	h.seen = h.seen[i:]
}

// Premium is the share of its price a pool's Spot offering is raised by now.
func (h *History) Premium(instanceType, zone string) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.premium(instanceType+"/"+zone, h.clock.Now())
}

func (h *History) premium(pool string, now time.Time) float64 {
	total := 0.0
	for _, s := range h.seen {
		if age := now.Sub(s.at); s.pool == pool && age < Window {
			total += PremiumPerInterruption * (1 - float64(age)/float64(Window))
		}
	}
	return total
}

// Apply returns its with the Spot offerings of recently interrupted pools priced higher (copies of the types it
// changes; the others as they are). The premium is in Offering.RiskPremium, so that what the node is billed at
// (ListPrice) stays the list price.
func (h *History) Apply(its []*cloud.InstanceType) []*cloud.InstanceType {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	pools := map[string]bool{}
	for _, s := range h.seen {
		if now.Sub(s.at) < Window {
			pools[s.pool] = true
		}
	}
	if len(pools) == 0 {
		return its
	}
	out := its
	for i, it := range its {
		var offers cloud.Offerings
		for j, o := range it.Offerings {
			if o.CapacityType != stevedorev1.CapacityTypeSpot || !pools[it.Name+"/"+o.Zone] {
				continue
			}
			if offers == nil {
				offers = slices.Clone(it.Offerings)
			}
			premium := o.Price * h.premium(it.Name+"/"+o.Zone, now)
			offers[j].Price += premium
			offers[j].RiskPremium += premium
		}
		if offers == nil {
			continue
		}
		if &out[0] == &its[0] {
			out = slices.Clone(its)
		}
		out[i] = it.WithOfferings(offers)
	}
	return out
}

// Fallback is where a NodePool stands with its fallback to on-demand.
type Fallback struct {
	// Active while the NodePool plans on-demand instead of Spot, until Until.
	Active bool
	Until  time.Time
	// Interruptions of its Spot nodes within the policy's window.
	Interruptions int
	// Changed is true the first time Active is reported different from before.
	Changed bool
}

// FallbackOf says whether a NodePool with policy falls back to on-demand now: it starts once the NodePool's Spot
// nodes were interrupted policy.Interruptions times within policy.Window, and lasts until policy.Window passes
// without another.
func (h *History) FallbackOf(nodePool string, policy Policy) Fallback {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	var f Fallback
	var last time.Time
	for _, s := range h.seen {
		if s.nodePool == nodePool && now.Sub(s.at) < policy.Window {
			f.Interruptions++
			last = s.at
		}
	}
	until, was := h.fallback[nodePool]
	switch {
	case f.Interruptions >= policy.Interruptions || (was && f.Interruptions > 0):
		f.Active, f.Until = true, last.Add(policy.Window)
		h.fallback[nodePool] = f.Until
	case was && now.Before(until):
		f.Active, f.Until = true, until
	default:
		delete(h.fallback, nodePool)
	}
	f.Changed = f.Active != was
	return f
}

// Forget drops a NodePool's fallback (the NodePool, or its policy, is gone).
func (h *History) Forget(nodePool string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, was := h.fallback[nodePool]
	delete(h.fallback, nodePool)
	return was
}
