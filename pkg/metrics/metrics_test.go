package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentedAndUsedMetricsExist: every metric is documented in the README, and every stevedore_ name the
// README, the alert rules and the Grafana dashboard use is a metric that exists (a rename breaks this test, not
// an operator's pager).
func TestDocumentedAndUsedMetricsExist(t *testing.T) {
	names := map[string]bool{}
	for _, m := range All() {
		names[m.FQName()] = true
	}
	readme := read(t, "../../README.md")
	for name := range names {
		if !strings.Contains(readme, "`"+name) {
			t.Errorf("metric %s is not documented in the README", name)
		}
	}
	used := regexp.MustCompile(`stevedore_[a-z_]+`)
	for _, file := range []string{"../../README.md", "../../manifests/monitoring/prometheus-rules.yaml", "../../manifests/monitoring/grafana-dashboard.json"} {
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
