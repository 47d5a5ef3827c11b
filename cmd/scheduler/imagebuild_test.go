/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheImageBuildLeavesTheSandboxOut: the scheduler as `make image` builds it (-tags nosandbox) links none of
// the sandbox's control plane, simulated kubelets or AWS emulator, while `make build`'s binary has them.
func TestTheImageBuildLeavesTheSandboxOut(t *testing.T) {
	sandboxOnly := []string{
		"github.com/stevedore-dev/stevedore/pkg/sandbox",
		"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu",
		"go.etcd.io/etcd/server/v3/embed",
		"k8s.io/kubernetes/cmd/kube-apiserver/app",
		"sigs.k8s.io/kwok/pkg/kwok/controllers",
	}
	for _, tc := range []struct {
		tags    string
		present bool
	}{{"nosandbox", false}, {"", true}} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tc.tags, ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tc.tags, err, out)
		}
		deps := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			deps[line] = true
		}
		for _, pkg := range sandboxOnly {
			if deps[pkg] != tc.present {
				t.Errorf("built with tags %q, the scheduler links %s: %v, want %v", tc.tags, pkg, deps[pkg], tc.present)
			}
		}
	}
}
