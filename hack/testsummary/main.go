/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command testsummary reads `go test -json` on stdin and, as each package finishes, prints a line with its counts
// and the output of its failed tests; at the end a summary (tests passed, failed and skipped per package, and in
// total, and the failed tests' names), and exits 1 if anything failed. For a failed test it
// prints the test's own messages (t.Log, t.Error, t.Fatal: the lines "    name_test.go:NN: ..." and their
// continuation lines) in full, then the last lines of its whole output: a test that starts a process (the
// sandboxes' schedulers) has that process's log in its output too, and its last lines alone can hide the message
// that says what failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// longTest is how long a test runs before its end is reported as it happens (the package's line comes when all
// its tests are done).
const longTest = 30 * time.Second

// The actions of `go test -json` that end a test or a package.
const (
	actionPass = "pass"
	actionFail = "fail"
	actionSkip = "skip"
)

type counts struct {
	pass, fail, skip int
	elapsed          float64
	failedBuild      bool
}

func main() {
	if !summarize(os.Stdin, os.Stdout) {
		os.Exit(1)
	}
}

// summarize reads go test -json events from in and writes the report to out; it reports whether everything passed.
func summarize(in io.Reader, out io.Writer) bool {
	r := &run{out: out, start: time.Now(), pkgs: map[string]*counts{}, outputs: map[string]*strings.Builder{},
		messages: map[string]*testMessages{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(out, string(line)) // build errors and other plain output
			continue
		}
		r.event(ev)
	}
	return r.report()
}

// run is what the report keeps of a go test run as its events come: counts by package, and the output and own
// messages of each test until it passes (kept for those that fail).
type run struct {
	out      io.Writer
	start    time.Time
	pkgs     map[string]*counts
	outputs  map[string]*strings.Builder
	messages map[string]*testMessages
	failures []string
}

// event takes one event of go test -json.
func (r *run) event(ev event) {
	c := r.pkgs[ev.Package]
	if c == nil {
		c = &counts{}
		r.pkgs[ev.Package] = c
	}
	key := ev.Package + " " + ev.Test
	switch ev.Action {
	case "output":
		r.output(key, ev.Output)
	case actionPass, actionFail, actionSkip:
		if ev.Test == "" {
			c.elapsed = ev.Elapsed
			if ev.Action == actionFail && c.pass+c.fail+c.skip == 0 {
				c.failedBuild = true
				r.failures = append(r.failures, key)
			}
			finished(r.out, ev.Package, c, r.failures, r.messages, r.outputs, r.start)
			return
		}
		r.testDone(c, ev, key)
	}
}

// output keeps a line a test printed (its whole output up to 256 KiB, and its own messages).
func (r *run) output(key, text string) {
	b := r.outputs[key]
	if b == nil {
		b = &strings.Builder{}
		r.outputs[key] = b
	}
	if b.Len() < 256*1024 {
		b.WriteString(text)
	}
	m := r.messages[key]
	if m == nil {
		m = &testMessages{}
		r.messages[key] = m
	}
	m.add(text)
}

// testDone counts a test that ended; the output of one that did not fail is dropped.
func (r *run) testDone(c *counts, ev event, key string) {
	if ev.Elapsed >= longTest.Seconds() && !strings.Contains(ev.Test, "/") {
		// a long test shows progress inside its package
		fmt.Fprintf(r.out, "     %s %s.%s (%.0fs)\n", ev.Action, ev.Package, ev.Test, ev.Elapsed)
	}
	switch ev.Action {
	case actionPass:
		c.pass++
	case actionFail:
		c.fail++
		r.failures = append(r.failures, key)
	case actionSkip:
		c.skip++
	}
	if ev.Action != actionFail {
		delete(r.outputs, key)
		delete(r.messages, key)
	}
}

// report writes the summary: a line per package with tests, the failed tests, the totals. It reports whether
// everything passed.
func (r *run) report() bool {
	out := r.out
	names := make([]string, 0, len(r.pkgs))
	for n := range r.pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	var total counts
	fmt.Fprintln(out, "\n==== go test summary ====")
	for _, n := range names {
		c := r.pkgs[n]
		if c.pass+c.fail+c.skip == 0 && !c.failedBuild {
			continue
		}
		status := "ok  "
		if c.fail > 0 || c.failedBuild {
			status = "FAIL"
		}
		fmt.Fprintf(out, "%s %-70s %4d passed %3d failed %3d skipped %7.1fs\n", status, n, c.pass, c.fail, c.skip, c.elapsed)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
		total.failedBuild = total.failedBuild || c.failedBuild
	}
	for _, key := range r.failures {
		fmt.Fprintf(out, "FAILED %s\n", key)
	}
	fmt.Fprintf(out, "TOTAL: %d tests passed, %d failed, %d skipped (%s)\n", total.pass, total.fail, total.skip, time.Since(r.start).Round(time.Second))
	return total.fail == 0 && !total.failedBuild
}

// finished prints, when a package's tests are done, its failed tests' messages and output, then one line with its
// counts and the time since the run started.
func finished(out io.Writer, pkg string, c *counts, failures []string, messages map[string]*testMessages, outputs map[string]*strings.Builder, start time.Time) {
	for _, key := range failures {
		if !strings.HasPrefix(key, pkg+" ") {
			continue
		}
		fmt.Fprintf(out, "=== FAILED %s\n", key)
		if m := messages[key]; m != nil && m.b.Len() > 0 {
			fmt.Fprintf(out, "--- the test's own messages:\n%s", m.b.String())
		}
		if b := outputs[key]; b != nil {
			fmt.Fprintf(out, "--- the last lines of its output:\n%s", tail(b.String(), 200))
		}
		delete(messages, key)
		delete(outputs, key)
	}
	if c.pass+c.fail+c.skip == 0 && !c.failedBuild {
		return // no tests
	}
	status := "ok  "
	if c.fail > 0 || c.failedBuild {
		status = "FAIL"
	}
	fmt.Fprintf(out, "%s %s: %d passed, %d failed, %d skipped in %.1fs [%s]\n", status, pkg, c.pass, c.fail, c.skip, c.elapsed,
		time.Since(start).Round(time.Second))
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) <= lines {
		return s
	}
	return strings.Join(parts[len(parts)-lines:], "\n")
}

// testMessage is a line a test wrote through testing.T (t.Log, t.Error, t.Fatal...): go test indents it and
// prefixes the file and line that wrote it.
var testMessage = regexp.MustCompile(`^\s+[A-Za-z0-9_.-]+_test\.go:\d+: `)

// testMessages keeps a test's own messages out of everything else it printed: lines that match testMessage and
// the lines after one that are indented deeper (a multi-line message's continuation), up to 64 KiB.
type testMessages struct {
	b            strings.Builder
	continuation string // the indentation of the last message's continuation lines; "" when not in a message
}

func (m *testMessages) add(line string) {
	if m.b.Len() >= 64*1024 {
		return
	}
	if loc := testMessage.FindStringIndex(line); loc != nil {
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		m.continuation = line[:indent] + "    "
		m.b.WriteString(line)
		return
	}
	if m.continuation != "" && strings.HasPrefix(line, m.continuation) {
		m.b.WriteString(line)
		return
	}
	m.continuation = ""
}
