/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package terraform holds the Terraform example; its test checks the files the way `terraform fmt -check` and
// `terraform validate`'s parser do (the hcl library Terraform is built on), since no terraform binary can be
// installed here.
package terraform

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

func TestFilesAreFormattedAndParse(t *testing.T) {
	files, err := filepath.Glob("*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .tf files: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := hclsyntax.ParseConfig(src, f, hcl.Pos{Line: 1, Column: 1}); diags.HasErrors() {
			t.Errorf("%s does not parse: %s", f, diags.Error())
		}
		if formatted := hclwrite.Format(src); !bytes.Equal(formatted, src) {
			t.Errorf("%s is not formatted as terraform fmt would; formatted:\n%s", f, formatted)
		}
	}
}

// TestPolicyTemplateGetsEveryPlaceholder: the templatefile call of iam.tf fills exactly the placeholders of
// deploy/iam/stevedore-controller-policy.json.
func TestPolicyTemplateGetsEveryPlaceholder(t *testing.T) {
	policy, err := os.ReadFile("../iam/stevedore-controller-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	placeholders := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(string(policy), -1) {
		placeholders[m[1]] = true
	}
	iam, err := os.ReadFile("iam.tf")
	if err != nil {
		t.Fatal(err)
	}
	call := string(iam)[strings.Index(string(iam), "templatefile("):]
	call = call[:strings.Index(call, "})")]
	passed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+([A-Z_]+)\s+=`).FindAllStringSubmatch(call, -1) {
		passed[m[1]] = true
	}
	var want, got []string
	for k := range placeholders {
		want = append(want, k)
	}
	for k := range passed {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(want, ",") != strings.Join(got, ",") {
		t.Errorf("the policy's placeholders are %v but iam.tf passes %v", want, got)
	}
}

// TestEveryVariableUsedIsDeclared: each var.<name> the example reads has a variable block, and each variable
// block is read somewhere.
func TestEveryVariableUsedIsDeclared(t *testing.T) {
	files, err := filepath.Glob("*.tf")
	if err != nil {
		t.Fatal(err)
	}
	declared, used := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^variable "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
			declared[m[1]] = true
		}
		for _, m := range regexp.MustCompile(`\bvar\.([a-z_]+)`).FindAllStringSubmatch(string(src), -1) {
			used[m[1]] = true
		}
	}
	for name := range used {
		if !declared[name] {
			t.Errorf("var.%s is used but not declared in variables.tf", name)
		}
	}
	for name := range declared {
		if !used[name] {
			t.Errorf("variable %q is declared but never used", name)
		}
	}
}
