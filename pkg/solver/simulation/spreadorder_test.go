/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"fmt"
	"maps"
	"math"
	"math/rand"
	"testing"
)

// The ordered domains of a spread state must give the critical paths a walk over every domain gives (the two
// fewest matching pods, ties to the smaller name), whatever counts change, appear or vanish in between, in the
// state and in copies of it.
func TestOrderedDomainsGiveTheCriticalPathsAScanGives(t *testing.T) {
	scan := func(m map[string]int) [2]domainCount {
		best := [2]domainCount{{math.MaxInt32, ""}, {math.MaxInt32, ""}}
		for v, n := range m {
			switch d := (domainCount{n, v}); {
			case best[0].v == "" && best[0].n == math.MaxInt32 || lessDomainCount(d, best[0]):
				best[1], best[0] = best[0], d
			case lessDomainCount(d, best[1]):
				best[1] = d
			}
		}
		return best
	}
	for _, domains := range []int{1, 3, 40, 500} {
		t.Run(fmt.Sprintf("%d-domains", domains), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(domains)))
			m := map[string]int{}
			for d := 0; d < domains; d++ {
				m[fmt.Sprintf("d-%03d", d)] = rng.Intn(3)
			}
			sc := &spreadCounts{matchNum: []map[string]int{m}}
			var copies []*spreadCounts
			for step := 0; step < 4000; step++ {
				v := fmt.Sprintf("d-%03d", rng.Intn(domains+2)) // now and then a domain the state does not have
				was := sc.countOf(0, v)
				switch r := rng.Intn(10); {
				case r == 0:
					delete(m, v)
				case r < 6:
					m[v]++
				default:
					m[v]--
				}
				sc.moved(0, was)
				// the paths are asked for now and then, as a class's state is
				if rng.Intn(5) == 0 {
					if got, want := sc.leastLoaded(0), scan(m); got != want {
						t.Fatalf("step %d: ordered domains give %v, a scan %v", step, got, want)
					}
				}
				if step%500 == 0 {
					cp := &spreadCounts{matchNum: []map[string]int{maps.Clone(m)}}
					sc.cloneOrder(cp)
					copies = append(copies, cp)
				}
			}
			for i, cp := range copies {
				if got, want := cp.leastLoaded(0), scan(cp.matchNum[0]); got != want {
					t.Errorf("copy %d: ordered domains give %v, a scan %v", i, got, want)
				}
			}
		})
	}
}
