/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// TestKarpentersExamplesCarryOver applies, file by file, Stevedore's equivalents of the manifests in Karpenter's
// examples/v1 (the same kinds, fields and values, written in stevedore.dev/v1): the API server accepts each one
// (a server-side dry run, so files that reuse a name do not collide), and each EC2NodeClass's user data renders
// into what its nodes boot with, every part of the user's own kept. The families Stevedore does not launch (Amazon
// Linux 2, Windows) are refused with a message naming the field.
func TestKarpentersExamplesCarryOver(t *testing.T) {
	refused := map[string]string{
		"al2-custom-ami.yaml":          "spec.amiFamily",
		"windows-2019.yaml":            "spec.amiSelectorTerms[0].alias",
		"windows-2022.yaml":            "spec.amiSelectorTerms[0].alias",
		"windows-2025.yaml":            "spec.amiSelectorTerms[0].alias",
		"windows-custom-userdata.yaml": "spec.amiFamily",
	}
	// what the rendered user data must still contain, by file
	kept := map[string][]string{
		"al2-custom-userdata.yaml":      {"node class user data ran"},
		"al2-kubelet-log-query.yaml":    {"enableSystemLogQuery=true"},
		"al2023-custom-userdata.yaml":   {"strategy: Mount", "after nodeadm's config"},
		"br-custom-userdata.yaml":       {"kube-api-qps = 30"},
		"custom-family-with-alias.yaml": {"/etc/eks/bootstrap.sh my-cluster"},
		"custom-family.yaml":            {"/etc/eks/bootstrap.sh my-cluster"},
	}
	files, err := filepath.Glob("testdata/karpenter-examples/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d example files (%v)", len(files), err)
	}
	ctx := context.Background()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dec := manifest.NewDecoder()
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := dec.Decode(strings.NewReader(string(raw)))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			var errs []string
			for _, obj := range objs {
				switch o := obj.(type) {
				case *stevedorev1.NodePool:
					_, err = sb.Stevedore.StevedoreV1().NodePools().Create(ctx, o, dryRun)
				case *stevedorev1.EC2NodeClass:
					_, err = sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, o, dryRun)
					if err == nil {
						checkUserData(t, o, kept[name])
					}
				default:
					t.Fatalf("%s: unexpected kind", manifest.Name(obj))
				}
				if err != nil {
					if !apierrors.IsInvalid(err) {
						t.Fatalf("%s: %v", manifest.Name(obj), err)
					}
					errs = append(errs, err.Error())
				}
			}
			want, wantRefused := refused[name]
			switch {
			case !wantRefused && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case wantRefused && !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }):
				t.Fatalf("errors %v, want one naming %s", errs, want)
			}
		})
	}
}

// checkUserData renders the node class's user data as a launch does and checks the user's own parts are in it.
func checkUserData(t *testing.T, nc *stevedorev1.EC2NodeClass, want []string) {
	t.Helper()
	b := awscloud.Bootstrap{ClusterName: "my-cluster", ClusterEndpoint: "https://example.eks.amazonaws.com", CABundle: []byte("ca"),
		ServiceCIDR: "10.100.0.0/16", Kubelet: nc.Spec.Kubelet, InstanceStoreRAID0: nc.Spec.InstanceStorePolicy != nil}
	if nc.Spec.UserData != nil {
		b.UserData = *nc.Spec.UserData
	}
	out, err := b.Render(nc.AMIFamilyOrDefault())
	if err != nil {
		t.Fatalf("EC2NodeClass %s: user data does not render: %v", nc.Name, err)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("EC2NodeClass %s: the rendered user data lost %q:\n%s", nc.Name, w, out)
		}
	}
}
