/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestEveryVerdictIsInTheDocsTable: each reason a node stays (RetainReason) has its row in the table of
// docs/disruption.md, "Why a node stays", which is what a user reads the NodeClaim condition's reason against.
func TestEveryVerdictIsInTheDocsTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if typ, ok := spec.Type.(*ast.Ident); !ok || typ.Name != "RetainReason" {
			return true
		}
		for _, v := range spec.Values {
			if lit, ok := v.(*ast.BasicLit); ok {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				verdicts = append(verdicts, s)
			}
		}
		return true
	})
	if len(verdicts) < 10 {
		t.Fatalf("found %d verdicts in reasons.go: the test no longer reads them", len(verdicts))
	}
	raw, err := os.ReadFile("../../docs/disruption.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verdicts {
		if !strings.Contains(string(raw), "| `"+v+"` |") {
			t.Errorf("verdict %s has no row in docs/disruption.md's table of why a node stays", v)
		}
	}
}
