/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package scheduling is the algebra of node requirements: NodePool requirements, a pod's node selector and
// required node affinity, and an instance type's labels are all Requirements, intersected and compared one way.
// It narrows the instance types and offerings a node may use; whether a pod fits a node is decided by the
// scheduler's own Filter plugins, not here.
package scheduling

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Requirement is the set of values a label key may take: either a finite set (In), or every value but a finite set
// (NotIn; Exists is NotIn of nothing), optionally bounded for integer values (Gt, Lt). DoesNotExist is the empty
// finite set.
type Requirement struct {
	Key string
	// complement: values lists what is excluded rather than what is allowed.
	complement bool
	values     sets.Set[string]
	// gt and lt bound integer values exclusively; nil means unbounded.
	gt, lt *int64
	// MinValues asks that at least this many distinct values remain possible.
	MinValues *int
}

// Karpenter's inclusive integer bounds, which NodePool requirements and NodeOverlays take beside the node
// selector's operators.
const (
	OpGte corev1.NodeSelectorOperator = "Gte"
	OpLte corev1.NodeSelectorOperator = "Lte"
)

// NewRequirement builds a requirement from a node selector operator, or Gte or Lte: on integers, at least v is
// more than v-1, at most v is less than v+1.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (*Requirement, error) {
	r := &Requirement{Key: key, values: sets.New(values...)}
	switch op {
	case corev1.NodeSelectorOpIn:
	case corev1.NodeSelectorOpNotIn:
		r.complement = true
	case corev1.NodeSelectorOpExists:
		r.complement = true
		r.values = sets.New[string]()
	case corev1.NodeSelectorOpDoesNotExist:
		r.values = sets.New[string]()
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, OpGte, OpLte:
		if len(values) != 1 {
			return nil, fmt.Errorf("requirement %s %s needs one integer value, got %d", key, op, len(values))
		}
		v, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("requirement %s %s %q: not an integer", key, op, values[0])
		}
		r.complement = true
		r.values = sets.New[string]()
		switch op {
		case corev1.NodeSelectorOpGt:
			r.gt = &v
		case OpGte:
			v--
			r.gt = &v
		case corev1.NodeSelectorOpLt:
			r.lt = &v
		default:
			v++
			r.lt = &v
		}
	default:
		return nil, fmt.Errorf("requirement %s: unknown operator %q", key, op)
	}
	return r, nil
}

// MustRequirement is NewRequirement for static, known-good arguments.
func MustRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

// Has reports whether value is allowed.
func (r *Requirement) Has(value string) bool {
	if !r.withinBounds(value) {
		return false
	}
	if r.complement {
		return !r.values.Has(value)
	}
	return r.values.Has(value)
}

func (r *Requirement) withinBounds(value string) bool {
	if r.gt == nil && r.lt == nil {
		return true
	}
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	return (r.gt == nil || v > *r.gt) && (r.lt == nil || v < *r.lt)
}

// Intersection returns the values both requirements allow.
func (r *Requirement) Intersection(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, gt: pickPtr(r.gt, o.gt, greater[int64]), lt: pickPtr(r.lt, o.lt, less[int64]),
		MinValues: pickPtr(r.MinValues, o.MinValues, greater[int])}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = r.values.Union(o.values)
	case r.complement:
		out.values = o.values.Difference(r.values)
	case o.complement:
		out.values = r.values.Difference(o.values)
	default:
		out.values = r.values.Intersection(o.values)
	}
	if !out.complement {
		for v := range out.values {
			if !out.withinBounds(v) {
				out.values.Delete(v)
			}
		}
	}
	return out
}

// overlaps reports whether some value satisfies both requirements, without building their intersection.
func (r *Requirement) overlaps(o *Requirement) bool {
	switch {
	case !r.complement:
		for v := range r.values {
			if o.Has(v) {
				return true
			}
		}
		return false
	case !o.complement:
		for v := range o.values {
			if r.Has(v) {
				return true
			}
		}
		return false
	default:
		return !r.Intersection(o).IsEmpty()
	}
}

// IsEmpty reports whether no value is allowed (including an empty integer range).
func (r *Requirement) IsEmpty() bool {
	if !r.complement {
		return r.values.Len() == 0
	}
	if (r.gt != nil && *r.gt == math.MaxInt64) || (r.lt != nil && *r.lt == math.MinInt64) {
		return true // no int64 lies above the largest or below the smallest
	}
	return r.gt != nil && r.lt != nil && *r.gt+1 >= *r.lt
}

// AllowsAbsence reports whether a node without this label satisfies the requirement (NotIn, DoesNotExist).
func (r *Requirement) AllowsAbsence() bool {
	return r.gt == nil && r.lt == nil && ((r.complement && r.values.Len() > 0) || (!r.complement && r.values.Len() == 0))
}

// IsFinite reports whether the requirement lists its allowed values (In).
func (r *Requirement) IsFinite() bool { return !r.complement }

// Values returns the allowed values of a finite requirement, sorted; for a complement, the excluded ones.
func (r *Requirement) Values() []string { return sets.List(r.values) }

// Len is the number of allowed values of a finite requirement; MaxInt for a complement.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt
	}
	return r.values.Len()
}

// Any returns one allowed value of a finite requirement (the smallest), or "" for a complement.
func (r *Requirement) Any() string {
	if r.complement || r.values.Len() == 0 {
		return ""
	}
	return sets.List(r.values)[0]
}

// Pick returns the value a node gets for a requirement that allows several: the smallest value an In lists, else
// the smallest non-negative integer the requirement allows (a NodePool's Exists, NotIn, Gt or Lt on a key it
// labels). It returns "" when no value is allowed.
func (r *Requirement) Pick() string {
	if !r.complement {
		return r.Any()
	}
	start := int64(0)
	if r.gt != nil && *r.gt >= 0 {
		if *r.gt == math.MaxInt64 {
			return ""
		}
		start = *r.gt + 1
	}
	for v := start; v < start+int64(r.values.Len())+1; v++ {
		if s := strconv.FormatInt(v, 10); r.Has(s) {
			return s
		}
	}
	return ""
}

// NodeSelectorRequirement renders the requirement as a node selector term entry.
func (r *Requirement) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	switch {
	case r.gt != nil:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(*r.gt, 10)}}
	case r.lt != nil:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(*r.lt, 10)}}
	case r.complement && r.values.Len() == 0:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpExists}
	case r.complement:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpNotIn, Values: r.Values()}
	case r.values.Len() == 0:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpDoesNotExist}
	default:
		return corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpIn, Values: r.Values()}
	}
}

func (r *Requirement) String() string {
	nsr := r.NodeSelectorRequirement()
	if len(nsr.Values) > 5 {
		return fmt.Sprintf("%s %s [%s and %d more]", r.Key, nsr.Operator, strings.Join(nsr.Values[:5], ","), len(nsr.Values)-5)
	}
	return fmt.Sprintf("%s %s [%s]", r.Key, nsr.Operator, strings.Join(nsr.Values, ","))
}

func (r *Requirement) clone() *Requirement {
	out := *r
	out.values = r.values.Clone()
	return &out
}

// Requirements are requirements keyed by label key; requirements on the same key are intersected.
type Requirements map[string]*Requirement

// NewRequirements returns requirements made of rs, intersected by key.
func NewRequirements(rs ...*Requirement) Requirements {
	out := Requirements{}
	for _, r := range rs {
		out.Add(r)
	}
	return out
}

// Add intersects r into the requirements.
func (rs Requirements) Add(r *Requirement) {
	if existing, ok := rs[r.Key]; ok {
		rs[r.Key] = existing.Intersection(r)
		return
	}
	rs[r.Key] = r.clone()
}

// AddAll intersects every requirement of o into rs.
func (rs Requirements) AddAll(o Requirements) {
	for _, r := range o {
		rs.Add(r)
	}
}

// Clone returns a deep copy.
func (rs Requirements) Clone() Requirements {
	out := make(Requirements, len(rs))
	for k, r := range rs {
		out[k] = r.clone()
	}
	return out
}

// Get returns the requirement on key, or Exists-or-absent (anything) when there is none.
func (rs Requirements) Get(key string) *Requirement {
	if r, ok := rs[key]; ok {
		return r
	}
	return &Requirement{Key: key, complement: true, values: sets.New[string]()}
}

// Has reports whether rs constrain key.
func (rs Requirements) Has(key string) bool {
	_, ok := rs[key]
	return ok
}

// Intersects reports why rs and o cannot both hold, or nil if some node can satisfy both. A key only one side
// constrains is fine; a key both constrain must have a common value (or both allow the label to be absent).
func (rs Requirements) Intersects(o Requirements) error {
	for key, r := range rs {
		other, ok := o[key]
		if !ok {
			continue
		}
		if !r.overlaps(other) && !(r.AllowsAbsence() && other.AllowsAbsence()) {
			return fmt.Errorf("%s conflicts with %s", r, other)
		}
	}
	return nil
}

// Compatible reports why a node whose labels are described by node cannot satisfy rs, or nil if it can. A key rs
// constrain that the node leaves undefined is satisfiable only if rs allow the label to be absent (NotIn,
// DoesNotExist) or undefinedOK says the node will still define it.
func (rs Requirements) Compatible(node Requirements, undefinedOK func(key string) bool) error {
	for key, r := range rs {
		n, ok := node[key]
		if !ok || (n.IsFinite() && n.values.Len() == 0) {
			if r.AllowsAbsence() || (undefinedOK != nil && undefinedOK(key)) {
				continue
			}
			return fmt.Errorf("%s is required but the node does not have label %s", r, key)
		}
		if !r.overlaps(n) {
			return fmt.Errorf("%s conflicts with the node's %s", r, n)
		}
	}
	return nil
}

// Labels returns the labels rs pin: keys with exactly one allowed value.
func (rs Requirements) Labels() map[string]string {
	out := map[string]string{}
	for key, r := range rs {
		if r.IsFinite() && r.values.Len() == 1 {
			out[key] = r.Any()
		}
	}
	return out
}

// Key is a canonical encoding of the requirements' sets (complement, values and integer bounds of every key, sorted
// by key; not MinValues): equal sets give equal keys, so it can index a memo of what the requirements allow.
func (rs Requirements) Key() string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		r := rs[k]
		b.WriteString(k)
		if r.complement {
			b.WriteString(" not")
		}
		for _, v := range sets.List(r.values) {
			b.WriteString(" " + v)
		}
		if r.gt != nil {
			b.WriteString(" >" + strconv.FormatInt(*r.gt, 10))
		}
		if r.lt != nil {
			b.WriteString(" <" + strconv.FormatInt(*r.lt, 10))
		}
		b.WriteString(";")
	}
	return b.String()
}

// NodeSelectorRequirements renders rs sorted by key.
func (rs Requirements) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		out = append(out, rs[k].NodeSelectorRequirement())
	}
	return out
}

func (rs Requirements) String() string {
	var parts []string
	for _, r := range rs.NodeSelectorRequirements() {
		parts = append(parts, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
	}
	return strings.Join(parts, ", ")
}

// FromNodeSelectorRequirements converts node selector requirements.
func FromNodeSelectorRequirements(reqs ...corev1.NodeSelectorRequirement) (Requirements, error) {
	out := Requirements{}
	for _, r := range reqs {
		req, err := NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, err
		}
		out.Add(req)
	}
	return out, nil
}

// FromLabels returns requirements pinning each label to its value.
func FromLabels(labels map[string]string) Requirements {
	out := Requirements{}
	for k, v := range labels {
		out.Add(&Requirement{Key: k, values: sets.New(v)})
	}
	return out
}

// pickPtr returns whichever of a and b is set, or when both are, a if keepA says so and b otherwise.
func pickPtr[T cmp.Ordered](a, b *T, keepA func(a, b T) bool) *T {
	if a == nil || (b != nil && !keepA(*a, *b)) {
		return b
	}
	return a
}

func greater[T cmp.Ordered](a, b T) bool { return a > b }
func less[T cmp.Ordered](a, b T) bool    { return a < b }

// NodeSelectionKeys are the node label keys a pod's node selector and required node affinity name.
func NodeSelectionKeys(pod *corev1.Pod) map[string]bool {
	keys := map[string]bool{}
	for k := range pod.Spec.NodeSelector {
		keys[k] = true
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				keys[r.Key] = true
			}
		}
	}
	return keys
}
