/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/stevedore-dev/stevedore/pkg/version"
)

// TestDocumentedAndUsedMetricsExist: every metric is documented in docs/operations.md, and every stevedore_ name
// the docs, the alert rules and the Grafana dashboard use is a metric that exists (a rename breaks this test, not
// an operator's pager).
func TestDocumentedAndUsedMetricsExist(t *testing.T) {
	names := map[string]bool{}
	for _, m := range All() {
		names[m.FQName()] = true
	}
	reference := read(t, "../../docs/operations.md")
	for name := range names {
		if !strings.Contains(reference, "`"+name) {
			t.Errorf("metric %s is not documented in docs/operations.md", name)
		}
	}
	used := regexp.MustCompile(`stevedore_[a-z_]+`)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	for _, file := range append(docs, "../../README.md", "../../manifests/monitoring/prometheus-rules.yaml", "../../manifests/monitoring/grafana-dashboard.json") {
		for _, name := range used.FindAllString(read(t, file), -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && names[b] {
					base = b
				}
			}
			if !names[base] {
				t.Errorf("%s uses %s, which is not a Stevedore metric", file, name)
			}
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestBuildInfoNamesTheBinary: once registered, stevedore_build_info is 1 with the binary's versions.
func TestBuildInfoNamesTheBinary(t *testing.T) {
	Register()
	build := version.Get()
	want := fmt.Sprintf(`
# HELP stevedore_build_info [ALPHA] 1, labelled with the binary's Stevedore version and commit, the Kubernetes version it is built on and its Go version.
# TYPE stevedore_build_info gauge
stevedore_build_info{commit=%q,go_version=%q,kubernetes_version=%q,version=%q} 1
`, build.Commit, build.Go, build.Kubernetes, build.Stevedore)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "stevedore_build_info"); err != nil {
		t.Error(err)
	}
}
