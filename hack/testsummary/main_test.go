package main

import "testing"

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
