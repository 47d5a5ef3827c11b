/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// installedLease is what the installed configuration says of the lease's namespace instead of kube-system: nothing,
// so that the scheduler takes its own namespace ($STEVEDORE_NAMESPACE).
const installedLease = `  # the lease is in the scheduler's own namespace ($STEVEDORE_NAMESPACE, which the Deployment sets from the pod's),
  # where its Role allows it; set resourceNamespace to put it elsewhere
`

// TestInstalledConfigurationIsThisOne: manifests/deploy/scheduler-config.yaml (what `kubectl apply -k manifests/`
// installs) and the chart's copy are this file but for the leader-election namespace, left to the scheduler's own.
func TestInstalledConfigurationIsThisOne(t *testing.T) {
	want := strings.Replace(string(SchedulerConfig()), "  resourceNamespace: kube-system\n", installedLease, 1)
	for _, path := range []string{"../manifests/deploy/scheduler-config.yaml", "../charts/stevedore/files/scheduler-config.yaml"} {
		installed, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(installed) != want {
			t.Errorf("%s differs from config/scheduler-config.yaml by more than the lease's namespace (resourceNamespace: "+
				"kube-system replaced by the comment saying the scheduler takes its own)", path)
		}
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
			for _, r := range obj.Rules {
				if isAuthenticationReader(r) {
					continue // kube-scheduler's delegated authentication: one ConfigMap, read-only (below)
				}
				rules = append(rules, r)
			}
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

// isAuthenticationReader is the one ConfigMap rule Stevedore needs: reading extension-apiserver-authentication (the
// client CAs of delegated authentication), as Kubernetes' extension-apiserver-authentication-reader Role allows.
func isAuthenticationReader(r rbacv1.PolicyRule) bool {
	return len(r.Resources) == 1 && r.Resources[0] == "configmaps" && len(r.ResourceNames) == 1 &&
		r.ResourceNames[0] == "extension-apiserver-authentication" && len(r.APIGroups) == 1 && r.APIGroups[0] == "" &&
		!slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
}
