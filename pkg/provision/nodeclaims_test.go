/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestNodePoolHashClassifiesEveryTemplateField fails when a field is added to the NodePool template without a
// decision on whether changing it is drift: add it to hashed (and check the hash sees it) or to ignored (and clear
// it in NodePool.TemplateHash), and bump stevedorev1.NodePoolHashVersion when the hash changes.
func TestNodePoolHashClassifiesEveryTemplateField(t *testing.T) {
	hashed := map[string]bool{"ObjectMeta.Labels": true, "ObjectMeta.Annotations": true, "Spec.Taints": true,
		"Spec.StartupTaints": true, "Spec.NodeClassRef": true, "Spec.ExpireAfter": true, "Spec.TerminationGracePeriod": true}
	ignored := map[string]bool{"Spec.Requirements": true}
	var fields []string
	walk := func(prefix string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			fields = append(fields, prefix+typ.Field(i).Name)
		}
	}
	walk("ObjectMeta.", reflect.TypeOf(stevedorev1.TemplateObjectMeta{}))
	walk("Spec.", reflect.TypeOf(stevedorev1.NodeClaimTemplateSpec{}))
	for _, f := range fields {
		if !hashed[f] && !ignored[f] {
			t.Errorf("NodePool template field %s is neither hashed nor ignored by NodePool.TemplateHash", f)
		}
	}

	base := test.NodePool("np").Obj()
	h := base.TemplateHash()
	for name, change := range map[string]func(*stevedorev1.NodePool){
		"ObjectMeta.Labels":      func(np *stevedorev1.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"a": "b"} },
		"ObjectMeta.Annotations": func(np *stevedorev1.NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"a": "b"} },
		"Spec.Taints": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"Spec.StartupTaints": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"Spec.NodeClassRef": func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" },
		"Spec.ExpireAfter":  func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.ExpireAfter = stevedorev1.NewDuration(1) },
		"Spec.TerminationGracePeriod": func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 1}
		},
	} {
		np := base.DeepCopy()
		change(np)
		if np.TemplateHash() == h {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
	if np := test.NodePool("np").Require("k", corev1.NodeSelectorOpExists).Obj(); np.TemplateHash() != h {
		t.Error("changing the requirements changes the hash; drift checks them against the node's labels")
	}
}
