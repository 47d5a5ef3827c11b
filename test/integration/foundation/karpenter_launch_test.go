/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// refusedExamples are the example files the API server refuses (TestKarpentersExamplesCarryOver).
var refusedExamples = map[string]bool{"al2-custom-ami.yaml": true, "windows-2019.yaml": true, "windows-2022.yaml": true,
	"windows-2025.yaml": true, "windows-custom-userdata.yaml": true}

// publishedRelease is the oldest release of an alias's family the emulated AWS publishes for every Kubernetes
// minor (awsemu.Releases).
func publishedRelease(family string) string {
	for _, r := range awsemu.Releases() {
		if r.Family == family {
			return r.Version
		}
	}
	return ""
}

// TestKarpentersExamplesLaunch launches a node for each example the API server accepts: its EC2NodeClass and
// NodePools created (under names of their own), a pod that only its first NodePool can take, bound to a node
// launched from that EC2NodeClass. An example pinned to an AMI release AWS published for an older Kubernetes (as
// Karpenter's examples are) first leaves its EC2NodeClass not Ready, saying so; pinned to a release the emulated
// AWS publishes for this cluster's version, it launches with that release's image. AMIs an example names by id are
// registered in the emulated account, as they would be in the user's.
func TestKarpentersExamplesLaunch(t *testing.T) {
	files, err := filepath.Glob("testdata/karpenter-examples/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d example files (%v)", len(files), err)
	}
	dec := manifest.NewDecoder()
	for i, f := range files {
		name := filepath.Base(f)
		if refusedExamples[name] {
			continue
		}
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			objs, err := dec.DecodeFile(f)
			if err != nil {
				t.Fatal(err)
			}
			launchExample(t, objs, fmt.Sprintf("ex%d", i))
		})
	}
}

// launchExample creates an example's objects with suffix added to their names and launches a node for its first
// NodePool.
func launchExample(t *testing.T, objs []runtime.Object, suffix string) {
	ctx := context.Background()
	var pools []*stevedorev1.NodePool
	classes := map[string]*stevedorev1.EC2NodeClass{}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *stevedorev1.NodePool:
			pools = append(pools, o)
		case *stevedorev1.EC2NodeClass:
			classes[o.Name] = o
		}
	}
	if len(pools) == 0 {
		t.Fatal("the example has no NodePool")
	}
	pool := pools[0]
	nc := classes[pool.Spec.Template.Spec.NodeClassRef.Name]
	if nc == nil {
		t.Fatalf("NodePool %s names EC2NodeClass %s, which the example does not have", pool.Name, pool.Spec.Template.Spec.NodeClassRef.Name)
	}
	nc, pool = nc.DeepCopy(), pool.DeepCopy()
	nc.Name, pool.Name = nc.Name+"-"+suffix, pool.Name+"-"+suffix
	pool.Spec.Template.Spec.NodeClassRef.Name = nc.Name
	for _, term := range nc.Spec.AMISelectorTerms {
		if term.ID != "" {
			sb.AWS.RegisterImage(term.ID, "users-own-"+term.ID, "amd64")
		}
	}
	pin := ""
	if terms := nc.Spec.AMISelectorTerms; len(terms) == 1 && terms[0].Alias != "" && !strings.HasSuffix(terms[0].Alias, "@latest") {
		family, release, _ := strings.Cut(terms[0].Alias, "@")
		if published := publishedRelease(family); published != release {
			createClass(t, nc)
			waitClassReady(t, nc.Name, false, "AWS publishes no such image for Kubernetes")
			cur, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, nc.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.Spec.AMISelectorTerms[0].Alias = family + "@" + published
			if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			release = published
		} else {
			createClass(t, nc)
		}
		pin = release
	} else {
		createClass(t, nc)
	}
	waitClassReady(t, nc.Name, true, "")
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodePool %s: %v", pool.Name, err)
	}
	t.Cleanup(func() { harness.DeleteNodePool(t, sb, pool.Name) })
	ns := harness.Namespace(t, sb)
	pod := harness.Pod(ns, "probe", "100m", "64Mi")
	pod.Spec.NodeSelector = map[string]string{stevedorev1.LabelNodePool: pool.Name}
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	harness.CreatePods(t, sb, pod)
	bound := harness.WaitBound(t, sb, ns, []string{pod.Name})[pod.Name]
	if node := harness.Node(t, sb, bound.Spec.NodeName); node.Labels[stevedorev1.LabelNodePool] != pool.Name {
		t.Errorf("the probe runs on %s, not on a node of NodePool %s", node.Name, pool.Name)
	}
	for _, c := range harness.NodeClaimsOf(t, sb, pool.Name) {
		if image := sb.AWS.EC2.ImageName(c.Status.ImageID); pin != "" && c.Status.ImageID != "" && !strings.Contains(image, pin) {
			t.Errorf("NodeClaim %s launched %s, not an image of release %s", c.Name, image, pin)
		}
	}
}

func createClass(t *testing.T, nc *stevedorev1.EC2NodeClass) {
	t.Helper()
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(context.Background(), nc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating EC2NodeClass %s: %v", nc.Name, err)
	}
	// after the NodePool (cleanups run last-registered first): its nodes go first
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), nc.Name, metav1.DeleteOptions{})
	})
}

// waitClassReady waits until an EC2NodeClass's Ready condition is ready (true or false), its message containing
// message.
func waitClassReady(t *testing.T, name string, ready bool, message string) {
	t.Helper()
	harness.EventuallyWithin(t, 2*time.Minute, fmt.Sprintf("EC2NodeClass %s Ready=%v", name, ready), func(ctx context.Context) (bool, error) {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range nc.Status.Conditions {
			if c.Type == stevedorev1.ConditionReady && (c.Status == metav1.ConditionTrue) == ready && strings.Contains(c.Message, message) {
				return true, nil
			}
		}
		return false, nil
	})
}
