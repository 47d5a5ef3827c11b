/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"
)

// TestRewriteConfigFile: --kubeconfig wins over the file's, and a lease without a namespace goes to
// $STEVEDORE_NAMESPACE; a file that says both itself is used as it is.
func TestRewriteConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name, file, kubeconfigFlag, namespace string
		wantKubeconfig, wantLeaseNamespace    string
		wantCopy                              bool
	}{
		{name: "lease namespace from the pod", file: "leaderElection: {leaderElect: true, resourceName: x}\n", namespace: "autoscaling",
			wantLeaseNamespace: "autoscaling", wantCopy: true},
		{name: "the file's lease namespace wins", file: "leaderElection: {leaderElect: true, resourceNamespace: stevedore}\n", namespace: "autoscaling",
			wantLeaseNamespace: "stevedore"},
		{name: "no namespace in the environment", file: "leaderElection: {leaderElect: true}\n"},
		{name: "--kubeconfig wins", file: "clientConnection: {kubeconfig: /etc/file}\n", kubeconfigFlag: "/tmp/flag",
			wantKubeconfig: "/tmp/flag", wantCopy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			opts := &scheduleroptions.Options{ConfigFile: path}
			flags := pflag.NewFlagSet("test", pflag.ContinueOnError)
			flags.String("kubeconfig", "", "")
			if tc.kubeconfigFlag != "" {
				if err := flags.Set("kubeconfig", tc.kubeconfigFlag); err != nil {
					t.Fatal(err)
				}
			}
			cleanup, err := rewriteConfigFile(opts, flags, func(k string) string {
				if k == "STEVEDORE_NAMESPACE" {
					return tc.namespace
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			if copied := opts.ConfigFile != path; copied != tc.wantCopy {
				t.Fatalf("copied %v, want %v", copied, tc.wantCopy)
			}
			raw, err := os.ReadFile(opts.ConfigFile)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ClientConnection struct{ Kubeconfig string } `json:"clientConnection"`
				LeaderElection   struct {
					ResourceNamespace string `json:"resourceNamespace"`
				} `json:"leaderElection"`
			}
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if tc.wantKubeconfig != "" && doc.ClientConnection.Kubeconfig != tc.wantKubeconfig {
				t.Errorf("kubeconfig %q, want %q", doc.ClientConnection.Kubeconfig, tc.wantKubeconfig)
			}
			if doc.LeaderElection.ResourceNamespace != tc.wantLeaseNamespace {
				t.Errorf("lease namespace %q, want %q", doc.LeaderElection.ResourceNamespace, tc.wantLeaseNamespace)
			}
		})
	}
}
