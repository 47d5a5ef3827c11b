/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"strings"
	"testing"
)

// multipartUserData is user data of the given parts, each a content type and a body, as EC2 passes it to nodeadm.
func multipartUserData(parts ...[2]string) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n")
	for _, p := range parts {
		b.WriteString("--//\nContent-Type: " + p[0] + "\n\n" + p[1] + "\n")
	}
	b.WriteString("--//--\n")
	return b.String()
}

const stevedoresNodeConfig = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster: {name: my-cluster, apiServerEndpoint: https://example.com}
  kubelet:
    config: {maxPods: 29}
    flags: [--node-labels=stevedore.dev/nodepool=general]
`

func TestParseUserData(t *testing.T) {
	for _, tc := range []struct {
		name, userData string
		wantMaxPods    int64
		wantLabel      string
		wantErr        string
	}{
		{name: "Stevedore's NodeConfig", userData: multipartUserData([2]string{"application/node.eks.aws", stevedoresNodeConfig}),
			wantMaxPods: 29, wantLabel: "general"},
		{name: "the user's part merged before Stevedore's", userData: multipartUserData(
			[2]string{"application/node.eks.aws", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config: {maxPods: 110}\n"},
			[2]string{"application/node.eks.aws", stevedoresNodeConfig}), wantMaxPods: 29, wantLabel: "general"},
		{name: "the user's part after Stevedore's wins", userData: multipartUserData(
			[2]string{"application/node.eks.aws", stevedoresNodeConfig},
			[2]string{"application/node.eks.aws", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config: {maxPods: 110}\n"}),
			wantMaxPods: 110, wantLabel: "general"},
		{name: "a shell script beside the NodeConfig", userData: multipartUserData(
			[2]string{"text/x-shellscript", "#!/bin/bash\necho hello"},
			[2]string{"application/node.eks.aws", stevedoresNodeConfig}), wantMaxPods: 29, wantLabel: "general"},
		{name: "a part without the cluster", userData: multipartUserData(
			[2]string{"application/node.eks.aws", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {name: my-cluster}\n"}),
			wantErr: "lacks the cluster name or API server endpoint"},
		{name: "no NodeConfig", userData: multipartUserData([2]string{"text/x-shellscript", "#!/bin/bash\necho hello"}), wantErr: "no NodeConfig"},
		{name: "no user data", userData: "", wantErr: "no user data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseUserData(tc.userData)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.maxPods != tc.wantMaxPods {
				t.Errorf("maxPods %d, want %d", cfg.maxPods, tc.wantMaxPods)
			}
			if got := cfg.labels["stevedore.dev/nodepool"]; got != tc.wantLabel {
				t.Errorf("label stevedore.dev/nodepool %q, want %q", got, tc.wantLabel)
			}
		})
	}
}
