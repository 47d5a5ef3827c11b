// Command testsummary reads `go test -json` on stdin, prints the output of failed tests and a summary (tests
// passed, failed and skipped per package, and in total), and exits 1 if anything failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
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

type counts struct {
	pass, fail, skip int
	elapsed          float64
	failedBuild      bool
}

func main() {
	pkgs := map[string]*counts{}
	outputs := map[string]*strings.Builder{}
	var failures []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	start := time.Now()
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			fmt.Println(string(line)) // build errors and other plain output
			continue
		}
		c := pkgs[ev.Package]
		if c == nil {
			c = &counts{}
			pkgs[ev.Package] = c
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			if b.Len() < 256*1024 {
				b.WriteString(ev.Output)
			}
		case "pass", "fail", "skip":
			if ev.Test == "" {
				c.elapsed = ev.Elapsed
				if ev.Action == "fail" && c.pass+c.fail+c.skip == 0 {
					c.failedBuild = true
					failures = append(failures, key)
				}
				continue
			}
			switch ev.Action {
			case "pass":
				c.pass++
			case "fail":
				c.fail++
				failures = append(failures, key)
			case "skip":
				c.skip++
			}
			if ev.Action != "fail" {
				delete(outputs, key)
			}
		}
	}
	for _, key := range failures {
		fmt.Printf("=== FAILED %s\n", key)
		if b := outputs[key]; b != nil {
			fmt.Print(tail(b.String(), 200))
		}
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	var total counts
	fmt.Println("\n==== go test summary ====")
	for _, n := range names {
		c := pkgs[n]
		if c.pass+c.fail+c.skip == 0 && !c.failedBuild {
			continue
		}
		status := "ok  "
		if c.fail > 0 || c.failedBuild {
			status = "FAIL"
		}
		fmt.Printf("%s %-70s %4d passed %3d failed %3d skipped %7.1fs\n", status, n, c.pass, c.fail, c.skip, c.elapsed)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
		total.failedBuild = total.failedBuild || c.failedBuild
	}
	fmt.Printf("TOTAL: %d tests passed, %d failed, %d skipped (%s)\n", total.pass, total.fail, total.skip, time.Since(start).Round(time.Second))
	if total.fail > 0 || total.failedBuild {
		os.Exit(1)
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) <= lines {
		return s
	}
	return strings.Join(parts[len(parts)-lines:], "\n")
}
