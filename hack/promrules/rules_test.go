/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package promrules checks Stevedore's alert rules as promtool does: each rule group parses as a Prometheus rule
// file, every expression as PromQL, every annotation template as a Go template. It is its own module, so that
// Prometheus's dependencies stay out of Stevedore's.
package promrules

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// TestAlertRulesAreValidPrometheusRules reads the PrometheusRule of manifests/monitoring and of the chart, and
// checks what `promtool check rules` checks: the groups, the alert names, the durations, the PromQL of every
// expression and the templates of every annotation; and that each alert has a severity and a summary.
func TestAlertRulesAreValidPrometheusRules(t *testing.T) {
	for _, path := range []string{"../../manifests/monitoring/prometheus-rules.yaml", "../../charts/stevedore/files/prometheus-rules.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Kind string
			Spec struct {
				Groups []any `json:"groups"`
			}
		}
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj.Kind != "PrometheusRule" || len(obj.Spec.Groups) == 0 {
			t.Fatalf("%s: kind %q with %d groups", path, obj.Kind, len(obj.Spec.Groups))
		}
		// the spec's groups are a Prometheus rule file
		file, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
		if err != nil {
			t.Fatal(err)
		}
		promql := parser.NewParser(parser.Options{})
		groups, errs := rulefmt.Parse(file, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
		for _, err := range errs {
			t.Errorf("%s: %v", path, err)
		}
		if groups == nil {
			continue
		}
		alerts := 0
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts++
				if _, err := promql.ParseExpr(r.Expr); err != nil {
					t.Errorf("%s: alert %s: %v", path, r.Alert, err)
				}
				if r.Labels["severity"] == "" || strings.TrimSpace(r.Annotations["summary"]) == "" {
					t.Errorf("%s: alert %s needs a severity label and a summary", path, r.Alert)
				}
			}
		}
		if alerts == 0 {
			t.Errorf("%s: no alert", path)
		}
	}
}
