/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
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

// TestTheInstalledRBACIsMinimal reads the ClusterRole the manifests install and refuses what Stevedore never
// needs: wildcards, Secrets and ConfigMaps, RBAC or impersonation powers, and writing pods beyond deleting them
// and patching their pod-deletion-cost annotation (the API server's own tests with the ServiceAccount's token, in
// test/e2e, prove the rules suffice).
func TestTheInstalledRBACIsMinimal(t *testing.T) {
	raw, err := os.ReadFile("../manifests/deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ClusterRole" || obj.Kind == "Role" {
			rules = append(rules, obj.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatal("no ClusterRole rules found in manifests/deploy/rbac.yaml")
	}
	forbiddenResources := map[string]bool{"secrets": true, "configmaps": true, "serviceaccounts/token": true,
		"clusterroles": true, "clusterrolebindings": true, "roles": true, "rolebindings": true}
	forbiddenVerbs := map[string]bool{"*": true, "escalate": true, "bind": true, "impersonate": true}
	for i, r := range rules {
		for _, g := range r.APIGroups {
			if g == "*" {
				t.Errorf("rule %d grants every API group", i)
			}
		}
		for _, res := range r.Resources {
			if res == "*" || forbiddenResources[res] {
				t.Errorf("rule %d grants %s", i, res)
			}
			if res == "pods" {
				for _, v := range r.Verbs {
					if v != "get" && v != "list" && v != "watch" && v != "delete" && v != "patch" {
						t.Errorf("rule %d lets Stevedore %s pods; it only reads, deletes and annotates them (binding is kube-scheduler's role)", i, v)
					}
				}
			}
		}
		for _, v := range r.Verbs {
			if forbiddenVerbs[v] {
				t.Errorf("rule %d grants the verb %s", i, v)
			}
		}
	}
}
