/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cost

import (
	"cmp"
	"slices"
)

// Other names the line that sums what a top list leaves out (its namespace, kind and name).
const Other = "other"

// Line is one namespace's or workload's hourly cost (Kind and Name empty for a namespace).
type Line struct {
	Namespace string  `json:"namespace"`
	Kind      string  `json:"kind,omitempty"`
	Name      string  `json:"name,omitempty"`
	Hourly    float64 `json:"hourly"`
}

// Namespaces lists the namespaces' costs (DaemonSet pods apart).
func (r *Report) Namespaces() []Line {
	out := make([]Line, 0, len(r.ByNamespace))
	for ns, c := range r.ByNamespace {
		out = append(out, Line{Namespace: ns, Hourly: c})
	}
	return out
}

// Workloads lists the workloads' costs (DaemonSets apart).
func (r *Report) Workloads() []Line { return workloadLines(r.ByWorkload) }

// DaemonSetLines lists the DaemonSets' costs.
func (r *Report) DaemonSetLines() []Line { return workloadLines(r.DaemonSetsByName) }

func workloadLines(m map[Workload]float64) []Line {
	out := make([]Line, 0, len(m))
	for w, c := range m {
		out = append(out, Line{Namespace: w.Namespace, Kind: w.Kind, Name: w.Name, Hourly: c})
	}
	return out
}

// Top keeps the n costliest lines (ties by namespace, kind and name) and sums the others into one line whose
// namespace (and, for workloads, kind and name) is Other.
func Top(lines []Line, n int) []Line {
	sorted := slices.Clone(lines)
	slices.SortFunc(sorted, func(a, b Line) int {
		if c := cmp.Compare(b.Hourly, a.Hourly); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	if len(sorted) <= n {
		return sorted
	}
	other := Line{Namespace: Other}
	if sorted[0].Kind != "" {
		other.Kind, other.Name = Other, Other
	}
	for _, l := range sorted[n:] {
		other.Hourly += l.Hourly
	}
	return append(sorted[:n:n], other)
}
