/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package manifest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

func TestExpandCreatesTheWorkloadsPodsAsTheControllersAndAdmissionWould(t *testing.T) {
	in := `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead: {podFixed: {cpu: 250m, memory: 160Mi}}
scheduling: {nodeSelector: {sandboxed: "true"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      runtimeClassName: kata
      containers: [{name: c, image: i, resources: {limits: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  selector: {matchLabels: {app: db}}
  serviceName: db
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  parallelism: 4
  completions: 2
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: paused}
spec:
  schedule: "* * * * *"
  suspend: true
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 0 * * *"
  jobTemplate: {spec: {parallelism: 2, template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}
`
	objs, err := NewDecoder().Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Expand(objs)
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for _, o := range out {
		p, ok := o.(*corev1.Pod)
		if !ok {
			t.Fatalf("Expand returned a %T; workloads and RuntimeClasses become pods", o)
		}
		pods[p.Namespace+"/"+p.Name] = p
	}
	want := []string{"default/web-0", "default/web-1", "default/web-2", "data/db-0", "default/once-0", "default/once-1",
		"default/nightly-0", "default/nightly-1"}
	if len(pods) != len(want) {
		t.Errorf("got pods %v, want %v", keys(pods), want)
	}
	for _, name := range want {
		if pods[name] == nil {
			t.Errorf("no pod %s (got %v)", name, keys(pods))
		}
	}
	web := pods["default/web-1"]
	if web == nil {
		t.FailNow()
	}
	if got := web.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1" {
		t.Errorf("web's cpu request %s, want the limit 1", got)
	}
	if got := web.Spec.Overhead.Cpu().String(); got != "250m" {
		t.Errorf("web's overhead %s, want the RuntimeClass's 250m", got)
	}
	if web.Spec.NodeSelector["sandboxed"] != "true" || web.Labels["app"] != "web" || web.UID == "" {
		t.Errorf("web pod %v: want the RuntimeClass's node selector, the template's labels and a UID", web.ObjectMeta)
	}
	if db := pods["data/db-0"]; db != nil && db.Labels["statefulset.kubernetes.io/pod-name"] != "db-0" {
		t.Errorf("StatefulSet pod labels %v", db.Labels)
	}
}

func TestExpandRefusesAPodNamingAMissingRuntimeClass(t *testing.T) {
	objs, err := NewDecoder().Decode(strings.NewReader(`apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {runtimeClassName: gvisor, containers: [{name: c, image: i}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Expand(objs); err == nil || !strings.Contains(err.Error(), `RuntimeClass "gvisor"`) || !strings.Contains(err.Error(), "default/p") {
		t.Errorf("error %v, want one naming the pod and the RuntimeClass", err)
	}
}

func TestDecodeExplainsObjectsItDoesNotRead(t *testing.T) {
	for in, want := range map[string]string{
		"apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: x}\n":         "NodePool/x (apiVersion karpenter.sh/v1beta1) is a Karpenter kind Stevedore does not read",
		"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: yy}\n":    "Provisioner/yy (apiVersion karpenter.sh/v1alpha5) is a Karpenter kind",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ns1}\n": "Widget/ns1/w (apiVersion example.com/v1) is not a kind Stevedore reads",
	} {
		_, err := NewDecoder().Decode(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decoding %q: error %v, want one containing %q", in, err, want)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestExpandCopiesOnlyThePodsAdmissionChanges(t *testing.T) {
	objs, err := NewDecoder().Decode(strings.NewReader(`apiVersion: v1
kind: Pod
metadata: {name: read, namespace: web, uid: 0b6c}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}, limits: {cpu: "2"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: no-uid, namespace: web}
spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Pod
metadata: {name: limits-only, namespace: web, uid: 7f1a}
spec: {containers: [{name: c, image: i, resources: {limits: {cpu: "2"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-limits-only, namespace: web, uid: 9e2d}
spec:
  resources: {limits: {memory: 1Gi}}
  containers: [{name: c, image: i}]
`))
	if err != nil {
		t.Fatal(err)
	}
	given := map[string]*corev1.Pod{}
	before := map[string]*corev1.Pod{}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		given[p.Name], before[p.Name] = p, p.DeepCopy()
	}
	out, err := Expand(objs)
	if err != nil {
		t.Fatal(err)
	}
	wantSame := map[string]bool{"read": true, "no-uid": false, "limits-only": false, "pod-limits-only": false}
	for _, o := range out {
		p := o.(*corev1.Pod)
		if same := p == given[p.Name]; same != wantSame[p.Name] {
			t.Errorf("pod %s: returned the given pod %v, want %v", p.Name, same, wantSame[p.Name])
		}
		if !equality.Semantic.DeepEqual(given[p.Name], before[p.Name]) {
			t.Errorf("pod %s: Expand changed the pod it was given", p.Name)
		}
	}
}
