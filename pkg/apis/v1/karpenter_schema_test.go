/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// karpenterRelease is the Karpenter release whose v1 schemas testdata/ lists, field path by field path.
const karpenterRelease = "karpenter-v1.14.1"

// schemaPaths lists every property of a schema as a dotted path, "[]" marking an array's items; a map or an object
// that keeps unknown fields is one path.
func schemaPaths(s apiextensionsv1.JSONSchemaProps, prefix string, out map[string]bool) {
	props := s.Properties
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		props, prefix = s.Items.Schema.Properties, prefix+"[]"
	}
	for name, p := range props {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out[path] = true
		schemaPaths(p, path, out)
	}
}

// notCarriedOver reads the fields docs/migration-from-karpenter.md lists as not carried over: rows "| `Kind
// path` | why |"; a path covers its subfields.
func notCarriedOver(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../../../docs/migration-from-karpenter.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `(NodePool|NodeClaim|EC2NodeClass|NodeOverlay) ([A-Za-z.\\[\\]]+)` \\|")
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

// TestEveryKarpenterFieldIsCarriedOverOrListed diffs the field paths of Karpenter's v1 schemas against Stevedore's
// CRDs: each of Karpenter's fields is one of Stevedore's (same path), or docs/migration-from-karpenter.md lists it
// as not carried over. A listed field that Stevedore has is an error too (the list would be out of date).
func TestEveryKarpenterFieldIsCarriedOverOrListed(t *testing.T) {
	listed := notCarriedOver(t)
	for _, tc := range []struct{ kind, plural string }{
		{"NodePool", "nodepools"}, {"NodeClaim", "nodeclaims"}, {"EC2NodeClass", "ec2nodeclasses"}, {"NodeOverlay", "nodeoverlays"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("../../../manifests/crds", "stevedore.dev_"+tc.plural+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				t.Fatal(err)
			}
			ours := map[string]bool{}
			for _, v := range crd.Spec.Versions {
				schemaPaths(*v.Schema.OpenAPIV3Schema, "", ours)
			}
			theirs, err := os.ReadFile(filepath.Join("testdata", karpenterRelease, tc.plural+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			covered := func(path string) bool {
				for _, l := range listed[tc.kind] {
					if path == l || strings.HasPrefix(path, l+".") || strings.HasPrefix(path, l+"[]") {
						return true
					}
				}
				return false
			}
			var missing []string
			for _, path := range strings.Fields(string(theirs)) {
				if !ours[path] && !covered(path) {
					missing = append(missing, path)
				}
			}
			sort.Strings(missing)
			for _, m := range missing {
				t.Errorf("Karpenter's %s %s is neither a field of Stevedore's nor listed as not carried over in docs/migration-from-karpenter.md", tc.kind, m)
			}
			for _, l := range listed[tc.kind] {
				if ours[l] {
					t.Errorf("docs/migration-from-karpenter.md lists %s %s as not carried over, but Stevedore has it", tc.kind, l)
				}
			}
		})
	}
}
