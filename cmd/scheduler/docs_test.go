/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// TestEveryFlagIsDocumented: each flag of `scheduler sandbox` has its row in docs/sandbox.md and each flag of
// `scheduler plan` and `scheduler convert` is named in docs/scheduling.md (the logging flags every Kubernetes command has excepted).
func TestEveryFlagIsDocumented(t *testing.T) {
	logging := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(logs.NewOptions(), logging)
	for _, tc := range []struct {
		doc, format string
		flags       *pflag.FlagSet
	}{
		{"../../docs/sandbox.md", "| `--%s", newSandboxCommand().Flags()},
		{"../../docs/scheduling.md", "`--%s", newPlanCommand().Flags()},
		{"../../docs/scheduling.md", "`--%s", newConvertCommand().Flags()},
	} {
		raw, err := os.ReadFile(tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		tc.flags.VisitAll(func(f *pflag.Flag) {
			if logging.Lookup(f.Name) != nil {
				return
			}
			if !strings.Contains(string(raw), strings.Replace(tc.format, "%s", f.Name, 1)) {
				t.Errorf("flag --%s is not documented in %s", f.Name, tc.doc)
			}
		})
	}
}

// TestTheDryRunExampleIsTrue: every line `scheduler plan --disrupt` prints for the example's input is in the
// example of docs/disruption.md, so the page shows what the command says.
func TestTheDryRunExampleIsTrue(t *testing.T) {
	raw, err := os.ReadFile("../../docs/disruption.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := newPlanCommand()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", "testdata/disrupt-owners.yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line != "" && !strings.Contains(string(raw), line) {
			t.Errorf("docs/disruption.md lacks the dry run's line %q", line)
		}
	}
}

// stevedoreKinds are the resources Karpenter also has (or Stevedore alone): bare, kubectl may answer with
// Karpenter's when both are installed.
var stevedoreKinds = regexp.MustCompile(`^(nodepools?|nodeclaims?|ec2nodeclass(es)?|nodeoverlays?|capacitybuffers?)$`)

// TestTheDocsNameStevedoresResourcesInFull: every kubectl command of the README and docs/ names Stevedore's
// resources with their group (nodepools.stevedore.dev) or short name, never bare (nodepools), which resolves to
// Karpenter's resource when both are installed.
func TestTheDocsNameStevedoresResourcesInFull(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../manifests/examples/README.md", "../../CHANGELOG.md")
	command := regexp.MustCompile("kubectl ([^`\n|]*)")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range command.FindAllStringSubmatch(line, -1) {
				args, _, _ := strings.Cut(m[1], " #") // a shell comment
				for _, arg := range strings.Fields(args) {
					for _, res := range strings.Split(arg, ",") {
						res, _, _ = strings.Cut(res, "/")
						if stevedoreKinds.MatchString(res) {
							t.Errorf("%s:%d: `kubectl %s` names %s without its group (%s.stevedore.dev)", filepath.Base(f), i+1,
								strings.TrimSpace(m[1]), res, res)
						}
					}
				}
			}
		}
	}
}

// TestEveryLinkOfTheDocsLeadsSomewhere: each relative link of the README, the CHANGELOG and docs/ names a file of
// the repository and, with a #fragment, a heading of that page (as GitHub makes anchors of headings).
func TestEveryLinkOfTheDocsLeadsSomewhere(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../CHANGELOG.md", "../../manifests/examples/README.md", "../../deploy/iam/README.md")
	heading := regexp.MustCompile(`(?m)^#+\s+(.+)$`)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := func(page string) map[string]bool {
		raw, err := os.ReadFile(page)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(raw), -1) {
			out[githubAnchor(m[1])] = true
		}
		return out
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			page := f
			if path != "" {
				page = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(page); err != nil {
					t.Errorf("%s links to %s, which does not exist", filepath.Base(f), target)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(page, ".md") && !anchors(page)[fragment] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", filepath.Base(f), target, filepath.Base(page))
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as hyphens, punctuation other than
// hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestEveryEventTheDocsNameIsRecorded: each event reason the docs, the README and the CHANGELOG name (a backticked
// name next to "event" or "warning") is a string in Stevedore's code, or one kube-scheduler or the node
// controller records: an alert on a documented reason must match something.
func TestEveryEventTheDocsNameIsRecorded(t *testing.T) {
	kubernetes := map[string]bool{"FailedScheduling": true, "Scheduled": true, "RegisteredNode": true, "Preempted": true}
	strs := map[string]bool{}
	err := filepath.WalkDir("../../pkg", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					strs[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../CHANGELOG.md")
	named := regexp.MustCompile("`([A-Z][A-Za-z]+)` (?:events?|warnings?)\\b|\\b(?:[Ee]vents?|Warning|Normal) \\(?`([A-Z][A-Za-z]+)`")
	found := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(raw), -1) {
			reason := m[1] + m[2]
			found++
			if !strs[reason] && !kubernetes[reason] {
				t.Errorf("%s names the event %s, which nothing records", file, reason)
			}
		}
	}
	if found < 20 {
		t.Errorf("found only %d event names in the docs: the pattern no longer matches how they are written", found)
	}
}
