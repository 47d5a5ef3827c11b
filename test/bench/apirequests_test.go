/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
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
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	total := 0.0
	for k, v := range after {
		d := v - before[k]
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
			total += d
			if d > 0 {
				rows = append(rows, kv{k, d})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v || (rows[i].v == rows[j].v && rows[i].k < rows[j].k) })
	var parts []string
	for i := 0; i < len(rows) && i < top; i++ {
		parts = append(parts, fmt.Sprintf("%s %.0f", rows[i].k, rows[i].v))
	}
	return total, strings.Join(parts, ", ")
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
