/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// TestEveryFlagIsDocumented: each flag of `scheduler sandbox` has its row in docs/sandbox.md and each flag of
// `scheduler plan` is named in docs/scheduling.md (the logging flags every Kubernetes command has excepted).
func TestEveryFlagIsDocumented(t *testing.T) {
	logging := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(logs.NewOptions(), logging)
	for _, tc := range []struct {
		doc, format string
		flags       *pflag.FlagSet
	}{
		{"../../docs/sandbox.md", "| `--%s", newSandboxCommand().Flags()},
		{"../../docs/scheduling.md", "`--%s", newPlanCommand().Flags()},
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
	cmd.SetArgs([]string{"--disrupt", "-f", "testdata/disrupt-cluster.yaml"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line != "" && !strings.Contains(string(raw), line) {
			t.Errorf("docs/disruption.md lacks the dry run's line %q", line)
		}
	}
}
