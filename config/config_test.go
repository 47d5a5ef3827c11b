package config

import (
	"os"
	"strings"
	"testing"
)

// TestInstalledConfigurationIsThisOne: manifests/deploy/scheduler-config.yaml (what `kubectl apply -k manifests/`
// installs) is this file but for the leader-election namespace, the one the manifests install into.
func TestInstalledConfigurationIsThisOne(t *testing.T) {
	installed, err := os.ReadFile("../manifests/deploy/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(SchedulerConfig()), "  resourceNamespace: kube-system\n", "  resourceNamespace: stevedore\n", 1)
	if string(installed) != want {
		t.Error("manifests/deploy/scheduler-config.yaml differs from config/scheduler-config.yaml by more than " +
			"resourceNamespace: stevedore; regenerate it with: sed 's/  resourceNamespace: kube-system/  resourceNamespace: stevedore/' " +
			"config/scheduler-config.yaml > manifests/deploy/scheduler-config.yaml")
	}
}
