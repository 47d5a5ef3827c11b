/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// apiRequests counts the requests the sandbox's kube-apiserver (in this process) served, by verb and resource
// (subresource after a slash), from its apiserver_request_total.
func apiRequests(b *testing.B) map[string]float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "apiserver_request_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["verb"] + " " + labels["resource"]
			if labels["subresource"] != "" {
				key += "/" + labels["subresource"]
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// apiWrites sums the writes (POST, PUT, PATCH, DELETE, APPLY) since before, and describes the largest kinds.
func apiWrites(before, after map[string]float64, top int) (float64, string) {
	writes := writesSince(before, after)
	return sum(writes), largest(writes, top)
}

// writesSince counts the writes (POST, PUT, PATCH, DELETE, APPLY) since before, by verb and resource.
func writesSince(before, after map[string]float64) map[string]float64 {
	writes := map[string]float64{}
	for k, v := range after {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
			if d := v - before[k]; d > 0 {
				writes[k] = d
			}
		}
	}
	return writes
}

// largest describes the top counts above zero, largest first (ties by name).
func largest(counts map[string]float64, top int) string {
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	for k, v := range counts {
		if v > 0 {
			rows = append(rows, kv{k, v})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v || (rows[i].v == rows[j].v && rows[i].k < rows[j].k) })
	var parts []string
	for i := 0; i < len(rows) && i < top; i++ {
		parts = append(parts, fmt.Sprintf("%s %.0f", rows[i].k, rows[i].v))
	}
	return strings.Join(parts, ", ")
}

// schedulerCounters reads the Stevedore counters of the scheduler process on port (its /metrics) whose names
// start with one of prefixes, summed by name and label set ("name{labels}").
func schedulerCounters(b *testing.B, port int, prefixes ...string) string {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil {
		b.Logf("reading the scheduler's metrics: %v", err)
		return ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "; ")
}

// eventsByReason counts the sandbox's events (events.k8s.io, every namespace) by reporting controller and reason,
// largest first, the top of them: who wrote the events of a run.
func eventsByReason(b *testing.B, sb *sandbox.Sandbox, top int) string {
	return countEvents(b, sb, top, func(e *eventsv1.Event) (string, bool) { return e.ReportingController + " " + e.Reason, true })
}

// failedSchedulingNotes counts the scheduler's FailedScheduling events by their note, names and numbers replaced, and
// returns the top most frequent: why attempts failed. The event recorder merges and rate-limits repeated events,
// so these are counts of events, not of attempts (scheduler_schedule_attempts_total counts those).
func failedSchedulingNotes(b *testing.B, sb *sandbox.Sandbox, top int) string {
	return countEvents(b, sb, top, func(e *eventsv1.Event) (string, bool) {
		return digits.ReplaceAllString(names.ReplaceAllString(e.Note, "NAME"), "N"), e.Reason == "FailedScheduling"
	})
}

// countEvents counts the sandbox's events (events.k8s.io, every namespace; a series as its count) by the key key
// gives those it keeps, and returns the top keys, largest first.
func countEvents(b *testing.B, sb *sandbox.Sandbox, top int, key func(*eventsv1.Event) (string, bool)) string {
	list, err := sb.Kube.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Logf("listing events: %v", err)
		return ""
	}
	counts := map[string]float64{}
	for i := range list.Items {
		e := &list.Items[i]
		k, ok := key(e)
		if !ok {
			continue
		}
		n := float64(1)
		if e.Series != nil {
			n = float64(e.Series.Count)
		} else if e.DeprecatedCount > 1 {
			n = float64(e.DeprecatedCount)
		}
		counts[k] += n
	}
	return largest(counts, top)
}

var (
	digits = regexp.MustCompile(`[0-9]+`)
	// names of nodes (ip-10-0-1-2.ec2.internal) and NodeClaims (scaleout-abcde)
	names = regexp.MustCompile(`\b(ip-[0-9-]+\.[a-z0-9.-]+|[a-z0-9]+-[a-z0-9]{5})\b`)
)
