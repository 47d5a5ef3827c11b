/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// query is an EC2 Query-protocol request body parsed into a tree: "A.1.B" becomes q.Get("A").Item(1).Get("B").
// Lists are 1-based and flattened, as the SDK sends them.
type query struct {
	value    string
	children map[string]*query
}

func parseQuery(form url.Values) *query {
	root := &query{children: map[string]*query{}}
	for key, values := range form {
		if len(values) == 0 {
			continue
		}
		node := root
		for _, part := range strings.Split(key, ".") {
			child, ok := node.children[part]
			if !ok {
				child = &query{children: map[string]*query{}}
				node.children[part] = child
			}
			node = child
		}
		node.value = values[0]
	}
	return root
}

// Get returns the child named name (an empty node if absent).
func (q *query) Get(name string) *query {
	if q == nil {
		return &query{}
	}
	if c, ok := q.children[name]; ok {
		return c
	}
	return &query{}
}

// Str returns the value at a dotted path.
func (q *query) Str(path string) string {
	node := q
	for _, part := range strings.Split(path, ".") {
		node = node.Get(part)
	}
	return node.value
}

// Int returns the integer at a dotted path, or def.
func (q *query) Int(path string, def int) int {
	v, err := strconv.Atoi(q.Str(path))
	if err != nil {
		return def
	}
	return v
}

// Bool returns the boolean at a dotted path, or def.
func (q *query) Bool(path string, def bool) bool {
	v, err := strconv.ParseBool(q.Str(path))
	if err != nil {
		return def
	}
	return v
}

// Present reports whether anything was sent at name.
func (q *query) Present(name string) bool {
	_, ok := q.children[name]
	return ok
}

// List returns the items of a flattened list (name.1, name.2, ...) in order.
func (q *query) List(name string) []*query {
	node := q.Get(name)
	var idx []int
	for k := range node.children {
		if i, err := strconv.Atoi(k); err == nil {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	out := make([]*query, 0, len(idx))
	for _, i := range idx {
		out = append(out, node.children[strconv.Itoa(i)])
	}
	return out
}

// Strings returns the values of a flattened list of scalars.
func (q *query) Strings(name string) []string {
	var out []string
	for _, item := range q.List(name) {
		out = append(out, item.value)
	}
	return out
}

// filter is an EC2 Describe filter.
type filter struct {
	Name   string
	Values []string
}

func (q *query) Filters() []filter {
	var out []filter
	for _, f := range q.List("Filter") {
		out = append(out, filter{Name: f.Str("Name"), Values: f.Strings("Value")})
	}
	return out
}

// tagSpecs returns the tags of the TagSpecification list for a resource type.
func (q *query) tagSpecs(resourceType string) map[string]string {
	tags := map[string]string{}
	for _, spec := range q.List("TagSpecification") {
		if spec.Str("ResourceType") != resourceType {
			continue
		}
		for _, t := range spec.List("Tag") {
			tags[t.Str("Key")] = t.Str("Value")
		}
	}
	return tags
}

// matchValue reports whether v matches one of the filter values (* wildcards allowed).
func matchValue(values []string, v string) bool {
	for _, want := range values {
		if wildcardMatch(want, v) {
			return true
		}
	}
	return false
}

func wildcardMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(s, p)
		}
		j := strings.Index(s, p)
		if j < 0 {
			return false
		}
		s = s[j+len(p):]
	}
	return true
}

// matchTags applies the tag:KEY and tag-key filters to tags; it reports handled=false for other filter names.
func matchTagFilter(f filter, tags map[string]string) (match, handled bool) {
	switch {
	case strings.HasPrefix(f.Name, "tag:"):
		v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]
		return ok && matchValue(f.Values, v), true
	case f.Name == "tag-key":
		for k := range tags {
			if matchValue(f.Values, k) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}
