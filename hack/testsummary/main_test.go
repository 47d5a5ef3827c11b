/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"strings"
	"testing"
)

func TestTestMessagesKeepsOnlyTheTestsOwnLines(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  string
	}{{
		name:  "a message among a process's log lines",
		lines: []string{"I1126 12:00:00.000 1 scheduler.go:10] bound pod\n", "    sigkill_test.go:42: seed 677766230\n", "E1126 more log\n"},
		want:  "    sigkill_test.go:42: seed 677766230\n",
	}, {
		name: "a multi-line message keeps its continuation lines and stops at the first line that is not one",
		lines: []string{"    sigkill_test.go:88: runs broke an invariant:\n", "        pod a lost\n", "        pod b lost\n",
			"I1126 log line\n", "        not a continuation any more\n"},
		want: "    sigkill_test.go:88: runs broke an invariant:\n        pod a lost\n        pod b lost\n",
	}, {
		name:  "a subtest's message is indented deeper",
		lines: []string{"=== RUN   TestX/case\n", "        x_test.go:7: got 1, want 2\n"},
		want:  "        x_test.go:7: got 1, want 2\n",
	}, {
		name:  "log lines naming a Go file that is not a test file are not messages",
		lines: []string{"    server.go:12: listening\n"},
		want:  "",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m testMessages
			for _, l := range tc.lines {
				m.add(l)
			}
			if got := m.b.String(); got != tc.want {
				t.Errorf("kept %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEachPackageIsReportedWhenItFinishes: a package's line, and its failures, are written as soon as its result
// arrives, before the next package's; the summary comes last and names the failed test.
func TestEachPackageIsReportedWhenItFinishes(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"a","Test":"TestA"}`,
		`{"Action":"output","Package":"a","Test":"TestA","Output":"    a_test.go:3: broke\n"}`,
		`{"Action":"fail","Package":"a","Test":"TestA"}`,
		`{"Action":"fail","Package":"a","Elapsed":1.5}`,
		`{"Action":"pass","Package":"b","Test":"TestLong","Elapsed":45}`,
		`{"Action":"pass","Package":"b","Test":"TestB"}`,
		`{"Action":"pass","Package":"b","Elapsed":2}`,
	}, "\n")
	var out strings.Builder
	if summarize(strings.NewReader(in), &out) {
		t.Error("a failed test reported as success")
	}
	got := out.String()
	order := []string{"=== FAILED a TestA", "a_test.go:3: broke", "FAIL a: 0 passed, 1 failed", "pass b.TestLong (45s)", "ok   b: 2 passed", "==== go test summary ====", "FAILED a TestA", "TOTAL: 2 tests passed, 1 failed"}
	at := 0
	for _, w := range order {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", w, got)
		}
		at += i + len(w)
	}
}
