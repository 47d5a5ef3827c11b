/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package manifest

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestDecodeReadsMultiDocumentYAMLAndLists(t *testing.T) {
	in := `# a comment-only document is skipped
---
apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
---
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
  {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"}}
]}
`
	objs, err := NewDecoder().Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("decoded %d objects, want 3", len(objs))
	}
	if _, ok := objs[0].(*stevedorev1.NodePool); !ok {
		t.Errorf("object 0 is %T, want NodePool", objs[0])
	}
	if _, ok := objs[1].(*corev1.Pod); !ok {
		t.Errorf("object 1 is %T, want Pod", objs[1])
	}
	if _, ok := objs[2].(*appsv1.DaemonSet); !ok {
		t.Errorf("object 2 is %T, want DaemonSet", objs[2])
	}
	if got := Name(objs[1]); got != "Pod/default/p" {
		t.Errorf("Name = %q", got)
	}
}

func TestDecodeRejectsUnknownFieldsAndKinds(t *testing.T) {
	for name, in := range map[string]string{
		"unknown field": "apiVersion: stevedore.dev/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {wieght: 3}\n",
		"unknown kind":  "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a}\n",
		"not yaml":      "apiVersion: v1\nkind: Pod\nmetadata: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewDecoder().Decode(strings.NewReader(in)); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestEveryExampleManifestDecodes(t *testing.T) {
	files, err := filepath.Glob("../../manifests/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests found: %v", err)
	}
	d := NewDecoder()
	for _, f := range files {
		if _, err := d.DecodeFile(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}
