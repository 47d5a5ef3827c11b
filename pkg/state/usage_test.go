package state

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestNodePoolUsageSumsEveryResourceOfLiveNodeClaims(t *testing.T) {
	claim := func(pool string, deleting bool, price string, capacity, requests corev1.ResourceList) *stevedorev1.NodeClaim {
		c := &stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stevedorev1.LabelNodePool: pool}}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		c.Status.Capacity, c.Status.Price, c.Spec.Resources.Requests = capacity, price, requests
		return c
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	usage := NodePoolUsage([]*stevedorev1.NodeClaim{
		claim("gpu", false, "1.0060", rl("cpu", "4", "memory", "16Gi", "nvidia.com/gpu", "1"), nil),
		claim("gpu", false, "", nil, rl("cpu", "2", "memory", "1Gi")), // not launched yet: its requests
		claim("gpu", true, "9.0000", rl("cpu", "64"), nil),            // being deleted: not counted
		claim("web", false, "0.0100", rl("cpu", "2"), nil),
	})
	gpu := usage["gpu"]
	for name, want := range map[string]string{"cpu": "6", "memory": "17Gi", "nvidia.com/gpu": "1", "nodes": "2"} {
		if q := gpu.Resources[corev1.ResourceName(name)]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("gpu %s = %s, want %s", name, q.String(), want)
		}
	}
	if gpu.Nodes != 2 || gpu.Cost != 1.006 {
		t.Errorf("gpu nodes %d cost %v, want 2 and 1.006", gpu.Nodes, gpu.Cost)
	}
	if web := usage["web"]; web == nil || web.Nodes != 1 {
		t.Errorf("web usage %+v", web)
	}
	if (*Usage)(nil).List() != nil {
		t.Error("no usage should list nothing")
	}
}
