/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const karpenterObjects = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

// shellBlock returns the first fenced sh block of a doc after the line containing marker.
func shellBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), marker)
	if !ok {
		t.Fatalf("%s has no %q", doc, marker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block after %q", doc, marker)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// docShell runs the shell blocks of the docs as written: in a folder where bin/scheduler is the binary under test,
// with a kubectl that talks to the sandbox first on the PATH.
type docShell struct {
	t   *testing.T
	dir string
	env []string
}

func newDocShell(t *testing.T, scheduler, kubectl, kubeconfig string) *docShell {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "path")
	for _, d := range []string{path, filepath.Join(dir, "bin")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(path, "kubectl"), fmt.Sprintf("#!/bin/sh\nexec %q --kubeconfig %q \"$@\"\n", kubectl, kubeconfig))
	if err := os.Chmod(filepath.Join(path, "kubectl"), 0o700); err != nil { //nolint:gosec // G302: a script the test runs
		t.Fatal(err)
	}
	if err := os.Symlink(scheduler, filepath.Join(dir, "bin", "scheduler")); err != nil {
		t.Fatal(err)
	}
	return &docShell{t: t, dir: dir, env: []string{"PATH=" + path + ":" + os.Getenv("PATH")}}
}

// run runs the first sh block of doc after marker (its lines unindented: a block in a list item is indented).
func (s *docShell) run(doc, marker string) (string, error) {
	s.t.Helper()
	var lines []string
	for _, l := range strings.Split(shellBlock(s.t, doc, marker), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return runIn(s.t, s.dir, s.env, "sh", "-e", "-c", strings.Join(lines, "\n"))
}

// runRecipes runs the dump-and-plan recipes of the docs as written, over Karpenter's objects stored under
// Karpenter's own CRDs in the sandbox.
func runRecipes(t *testing.T, scheduler, kubectl, kubeconfig string, k func(args ...string) (string, error)) {
	dir := t.TempDir()
	// Karpenter's own CRDs, from its CRD chart
	rendered, err := exec.Command(helmBinary(t), "template", "karpenter-crd", karpenterCRDChart(t, dir)).Output()
	if err != nil {
		t.Fatalf("helm template of Karpenter's CRD chart: %v", err)
	}
	crds := filepath.Join(dir, "karpenter-crds.yaml")
	objects := filepath.Join(dir, "karpenter.yaml")
	writeFile(t, crds, string(rendered))
	writeFile(t, objects, karpenterObjects)
	if out, err := k("apply", "--server-side", "-f", crds); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := k("wait", "--for=condition=Established", "--timeout=2m", "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh",
		"crd/ec2nodeclasses.karpenter.k8s.aws"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	eventually(t, "Karpenter's objects stored", func() error {
		_, err := k("apply", "-f", objects)
		return err
	})
	sh := newDocShell(t, scheduler, kubectl, kubeconfig)
	for _, tc := range []struct{ doc, marker, want string }{
		// the sandbox's pending pods planned on Karpenter's NodePool, read from the dump
		{"docs/scheduling.md", "**Preview a cluster Karpenter runs.**", " general "},
		{"docs/migration-from-karpenter.md", "0. **Preview**", "ec2nodeclasses.stevedore.dev/default keeps the node role KarpenterNodeRole-demo"},
	} {
		out, err := sh.run(tc.doc, tc.marker)
		if err != nil {
			t.Errorf("the recipe of %s, run as written, failed: %v\n%s", tc.doc, err, lastLines(out, 20))
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("the recipe of %s ran, but its output does not say %q:\n%s", tc.doc, tc.want, lastLines(out, 20))
		}
	}
}

// runIn runs a command in a folder, with env added, bounded to two minutes, and returns its combined output.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
