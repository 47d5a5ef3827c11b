/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestAnEC2NodeClassRoleGetsItsOwnInstanceProfile: an EC2NodeClass that names a role, as Karpenter's do, launches
// with an instance profile Stevedore created for it (its status names the profile); deleting the EC2NodeClass
// waits for its last NodeClaim, then deletes the profile.
func TestAnEC2NodeClassRoleGetsItsOwnInstanceProfile(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	const class = "own-profile"
	nc := harness.NewNodeClass()
	nc.Name = class
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := awscloud.ManagedInstanceProfileName("my-cluster", sb.AWS.Region(), class)
	harness.Eventually(t, "EC2NodeClass "+class+" to name its instance profile", func(ctx context.Context) (bool, error) {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nc.Status.InstanceProfile == want && meta.IsStatusConditionTrue(nc.Status.Conditions, awscloud.ConditionInstanceProfileReady) &&
			meta.IsStatusConditionTrue(nc.Status.Conditions, stevedorev1.ConditionReady), nil
	})
	profile, ok := sb.AWS.IAM.InstanceProfiles()[want]
	if !ok || len(profile.Roles) != 1 || profile.Roles[0] != nc.Spec.Role {
		t.Fatalf("instance profile %s: %+v (exists %t), want it holding %s", want, profile, ok, nc.Spec.Role)
	}

	pool := "own-profile"
	np := harness.NewNodePool(pool, pool)
	np.Spec.Template.Spec.NodeClassRef.Name = class
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, names := harness.Pods(ns, pool, "web", 1, "500m", "256Mi")
	harness.CreatePods(t, sb, pods...)
	bound := harness.WaitBound(t, sb, ns, names)
	inst := sb.AWS.EC2.InstanceByNodeName(bound[names[0]].Spec.NodeName)
	if inst == nil || inst.LaunchTemplate.InstanceProfile != want {
		t.Fatalf("the node's instance %+v, want it launched with instance profile %s", inst, want)
	}

	if err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the deleted EC2NodeClass to wait for its NodeClaim", func(ctx context.Context) (bool, error) {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, class, metav1.GetOptions{})
		return err == nil && nc.DeletionTimestamp != nil, err
	})
	if _, ok := sb.AWS.IAM.InstanceProfiles()[want]; !ok {
		t.Fatal("the instance profile was deleted while a node still runs with it")
	}
	harness.DeleteNodePool(t, sb, pool)
	harness.Eventually(t, "the EC2NodeClass and its instance profile to be gone", func(ctx context.Context) (bool, error) {
		_, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, class, metav1.GetOptions{})
		_, exists := sb.AWS.IAM.InstanceProfiles()[want]
		return apierrors.IsNotFound(err) && !exists, nil
	})
}

// TestPodsBindOnceTheirEC2NodeClassIsCreated: a NodePool and its pods applied before the EC2NodeClass they name (as
// a GitOps tool may apply them) leave the pods unprovisionable, with an event saying why; creating the
// EC2NodeClass, and its becoming ready, plans them again at once: they bind well before the minute after which
// unprovisionable pods are tried again anyway.
func TestPodsBindOnceTheirEC2NodeClassIsCreated(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	const class, pool = "applied-late", "applied-late"
	np := harness.NewNodePool(pool, pool)
	np.Spec.Template.Spec.NodeClassRef.Name = class
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		harness.DeleteNodePool(t, sb, pool)
		_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	pods, names := harness.Pods(ns, pool, "web", 3, "500m", "256Mi")
	harness.CreatePods(t, sb, pods...)
	harness.WaitEventSaying(t, sb, names[0], provision.ReasonFailedProvision, "EC2NodeClass "+class+" is not ready")

	nc := harness.NewNodeClass()
	nc.Name = class
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 30*time.Second, "the pods to bind on a node of the new EC2NodeClass", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			pod, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || pod.Spec.NodeName == "" {
				return false, err
			}
		}
		return true, nil
	})
}
