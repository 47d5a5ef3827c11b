/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestTheAPIServerRefusesTheLabelKeysStevedoreDoesNotLaunchWith: for requirements and template labels on every
// key Stevedore knows under Karpenter's domains and on keys it does not, the API server (the CRD's CEL rules)
// refuses exactly what stevedorev1.UnsupportedRequirement and UnsupportedTemplateLabel refuse (what
// `scheduler plan` and `scheduler convert` leave out of Karpenter's NodePools), naming the key.
func TestTheAPIServerRefusesTheLabelKeysStevedoreDoesNotLaunchWith(t *testing.T) {
	keys := append(stevedorev1.KarpenterAWSLabels(), stevedorev1.LabelCapacityType, "karpenter.sh/nodepool", "karpenter.sh/registered",
		stevedorev1.LabelCapacityReservationID, stevedorev1.LabelCapacityReservationType, stevedorev1.LabelCapacityReservationInterruptible,
		"karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition", "karpenter.k8s.aws/nitro-sandbox",
		"karpenter.k8s.aws/instance-pods", stevedorev1.LabelZoneID, "topology.k8s.aws/network-node-layer-1", "kubernetes.io/arch",
		"example.com/team", "team")
	type attempt struct {
		name string
		req  stevedorev1.NodeSelectorRequirementWithMinValues
		// labels are template labels instead of a requirement
		labels map[string]string
	}
	var attempts []attempt
	for _, k := range keys {
		value := "1"
		if k == stevedorev1.LabelInstanceTenancy {
			value = stevedorev1.TenancyDefault
		}
		attempts = append(attempts,
			attempt{name: k + " In", req: stevedorev1.NodeSelectorRequirementWithMinValues{Key: k, Operator: "In", Values: []string{value}}},
			attempt{name: k + " DoesNotExist", req: stevedorev1.NodeSelectorRequirementWithMinValues{Key: k, Operator: "DoesNotExist"}},
			attempt{name: k + " label", labels: map[string]string{k: value}})
	}
	for _, tenancy := range []stevedorev1.NodeSelectorRequirementWithMinValues{
		{Key: stevedorev1.LabelInstanceTenancy, Operator: "In", Values: []string{"dedicated"}},
		{Key: stevedorev1.LabelInstanceTenancy, Operator: "NotIn", Values: []string{"default"}},
		{Key: stevedorev1.LabelInstanceTenancy, Operator: "NotIn", Values: []string{"dedicated"}},
		{Key: stevedorev1.LabelInstanceTenancy, Operator: "Exists"},
	} {
		attempts = append(attempts, attempt{name: "tenancy " + string(tenancy.Operator) + " " + strings.Join(tenancy.Values, ","), req: tenancy})
	}
	attempts = append(attempts, attempt{name: "tenancy label dedicated", labels: map[string]string{stevedorev1.LabelInstanceTenancy: "dedicated"}},
		attempt{name: "Gte", req: stevedorev1.NodeSelectorRequirementWithMinValues{Key: stevedorev1.LabelInstanceCPU, Operator: "Gte", Values: []string{"4"}}},
		attempt{name: "Lte", req: stevedorev1.NodeSelectorRequirementWithMinValues{Key: stevedorev1.LabelInstanceMemory, Operator: "Lte", Values: []string{"16384"}}})
	ctx := context.Background()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			np := harness.NewNodePool("keys", "keys")
			var key, want string
			if a.labels != nil {
				for k, v := range a.labels {
					np.Spec.Template.ObjectMeta.Labels[k] = v
					key, want = k, stevedorev1.UnsupportedTemplateLabel(k, v)
				}
			} else {
				np.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{a.req}
				key, want = a.req.Key, stevedorev1.UnsupportedRequirement(a.req)
			}
			_, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, dryRun)
			switch {
			case want == "" && err != nil:
				t.Fatalf("refused, but Stevedore reads it: %v", err)
			case want != "" && err == nil:
				t.Fatalf("accepted, but Stevedore refuses it: %s", want)
			case want != "" && !apierrors.IsInvalid(err):
				t.Fatalf("error %v, want the CRD's validation", err)
			case want != "" && !strings.Contains(err.Error(), key) && !strings.Contains(err.Error(), "a key under"):
				t.Fatalf("error %v does not name %s", err, key)
			}
		})
	}
}
