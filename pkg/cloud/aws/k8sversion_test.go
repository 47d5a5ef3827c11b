/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"errors"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// aliasClass is a node class whose AMIs an alias selects.
func aliasClass(name, alias string) *stevedorev1.EC2NodeClass {
	nc := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}}}}
	if alias != "" {
		nc.Spec.AMISelectorTerms = []stevedorev1.AMISelectorTerm{{Alias: alias}}
	}
	return nc
}

// imageNames are the names of the images resolved, by key.
func imageNames(amis map[string]AMI) map[string]string {
	out := map[string]string{}
	for k, a := range amis {
		out[k] = a.Name
	}
	return out
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPinnedAliasesResolveThroughVersionedParameters: an alias pinned to a release resolves, for every
// architecture and variant AWS publishes, to the images of that release for the API server's Kubernetes version
// (AWS's versioned SSM parameters), not to the latest; a release AWS never published is an error naming it.
func TestPinnedAliasesResolveThroughVersionedParameters(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		alias string
		// want is a part of each image's name, by key
		want map[string]string
	}{
		{alias: "al2023@v20261001", want: map[string]string{
			"amd64": "al2023-x86_64-standard-1.37-v20261001", "arm64": "al2023-arm64-standard-1.37-v20261001",
			"amd64/nvidia": "al2023-x86_64-nvidia-1.37-v20261001", "arm64/nvidia": "al2023-arm64-nvidia-1.37-v20261001",
			"amd64/neuron": "al2023-x86_64-neuron-1.37-v20261001"}},
		{alias: "al2023@latest", want: map[string]string{
			"amd64": "al2023-x86_64-standard-1.37-v20261120", "arm64": "al2023-arm64-standard-1.37-v20261120",
			"amd64/nvidia": "al2023-x86_64-nvidia-1.37-v20261120", "arm64/nvidia": "al2023-arm64-nvidia-1.37-v20261120",
			"amd64/neuron": "al2023-x86_64-neuron-1.37-v20261120"}},
		{alias: "bottlerocket@v1.51.0", want: map[string]string{
			"amd64": "aws-k8s-1.37-x86_64-v1.51.0", "amd64/neuron": "aws-k8s-1.37-x86_64-v1.51.0", "arm64": "aws-k8s-1.37-arm64-v1.51.0",
			"amd64/nvidia": "aws-k8s-1.37-nvidia-x86_64-v1.51.0", "arm64/nvidia": "aws-k8s-1.37-nvidia-arm64-v1.51.0"}},
		// Bottlerocket's parameters name releases without the v; both spellings pin the same release
		{alias: "bottlerocket@1.51.0", want: map[string]string{
			"amd64": "aws-k8s-1.37-x86_64-v1.51.0", "amd64/neuron": "aws-k8s-1.37-x86_64-v1.51.0", "arm64": "aws-k8s-1.37-arm64-v1.51.0",
			"amd64/nvidia": "aws-k8s-1.37-nvidia-x86_64-v1.51.0", "arm64/nvidia": "aws-k8s-1.37-nvidia-arm64-v1.51.0"}},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			nc := aliasClass(strings.NewReplacer("@", "-", ".", "-").Replace(tc.alias), tc.alias)
			f.addNodeClass(t, nc)
			res, err := f.provider.Resolve(testCtx(t), nc)
			if err != nil {
				t.Fatal(err)
			}
			got := imageNames(res.AMIs)
			if strings.Join(keysOf(got), ",") != strings.Join(keysOf(tc.want), ",") {
				t.Fatalf("images for %v, want %v", keysOf(got), keysOf(tc.want))
			}
			for key, part := range tc.want {
				if !strings.Contains(got[key], part) || !res.AMIs[key].FromAlias {
					t.Errorf("%s: image %q (from the alias: %v), want one named like %q", key, got[key], res.AMIs[key].FromAlias, part)
				}
			}
		})
	}
	unpublished := aliasClass("unpublished", "al2023@v20190101")
	f.addNodeClass(t, unpublished)
	_, err := f.provider.Resolve(testCtx(t), unpublished)
	if err == nil || !strings.Contains(err.Error(), "al2023@v20190101") || !strings.Contains(err.Error(), "Kubernetes 1.37") {
		t.Fatalf("error %v, want one naming the alias and the Kubernetes version", err)
	}
}

// TestAMIsFollowTheControlPlaneUpgrade: after the API server reports another minor, aliases resolve to that
// minor's images (latest and pinned alike), a node launched before drifts; a failed read keeps the version read
// before and says so (condition, metric); before any good read, no alias resolves (no built-in version).
func TestAMIsFollowTheControlPlaneUpgrade(t *testing.T) {
	f := newFixture(t, nil)
	ctx := testCtx(t)
	c := claim("nc-upgrade", in(corev1.LabelInstanceTypeStable, "m5.large"))
	inst, err := f.provider.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	c.Status.ImageID = inst.ImageID
	if ok, reason, msg := f.provider.KubernetesVersionCondition(); !ok || !strings.Contains(msg, "1.37") {
		t.Errorf("condition %v %s %q, want true naming 1.37", ok, reason, msg)
	}

	f.apiServer.set("1.38", nil)
	changed, err := f.provider.k8sVersion.refresh(ctx)
	if err != nil || !changed {
		t.Fatalf("refresh after the upgrade: changed %v, %v", changed, err)
	}
	f.provider.discovery.forget()
	res, err := f.provider.Resolve(ctx, aliasClass("default", ""))
	if err != nil {
		t.Fatal(err)
	}
	if name := res.AMIs["amd64"].Name; !strings.Contains(name, "-1.38-") {
		t.Errorf("after the upgrade the default alias resolves to %q, want a 1.38 image", name)
	}
	if why, err := f.provider.IsDrifted(ctx, c); err != nil || why != "AMIDrift" {
		t.Errorf("a node launched on 1.37: IsDrifted = %q, %v, want AMIDrift", why, err)
	}

	failures := counter(t)
	f.apiServer.set("", errors.New("connection refused"))
	if _, err := f.provider.k8sVersion.refresh(ctx); err == nil {
		t.Fatal("a failed read reported no error")
	}
	if v, err := f.provider.KubernetesVersion(); err != nil || v != "1.38" {
		t.Errorf("after a failed read the version is %q (%v), want 1.38 kept", v, err)
	}
	if ok, reason, msg := f.provider.KubernetesVersionCondition(); ok || reason != "RefreshFailed" || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "1.38") {
		t.Errorf("condition %v %s %q, want RefreshFailed naming the error and the version kept", ok, reason, msg)
	}
	if got := counter(t) - failures; got != 1 {
		t.Errorf("%v failures counted, want 1", got)
	}

	never := newFixture(t, func(o *Options) {
		o.KubernetesVersion = (&fakeAPIServer{err: errors.New("forbidden")}).read
	})
	if _, err := never.provider.Resolve(ctx, aliasClass("default", "")); err == nil || !strings.Contains(err.Error(), "has not been read yet") {
		t.Errorf("resolving before any good read: %v, want the version unknown (no built-in fallback)", err)
	}
	if ok, reason, _ := never.provider.KubernetesVersionCondition(); ok || reason != "ReadFailed" {
		t.Errorf("condition %v %s, want ReadFailed", ok, reason)
	}
}

func counter(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(metrics.KubernetesVersionReadFailures)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKubernetesVersionOnlyTakesMajorMinor(t *testing.T) {
	f := newFixture(t, nil)
	f.apiServer.set("v1.38.0", nil)
	if _, err := f.provider.k8sVersion.refresh(testCtx(t)); err == nil {
		t.Error("a version that is not major.minor was taken")
	}
	if v, _ := f.provider.KubernetesVersion(); v != "1.37" {
		t.Errorf("version %q, want 1.37 kept", v)
	}
}
