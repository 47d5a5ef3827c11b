package provisioner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestQueueingHintsRequeueOnlyForEventsThatMayHelp(t *testing.T) {
	ours := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{stevedorev1.LabelNodePool: "np"}}}
	theirs := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	bound := &v1.Pod{Spec: v1.PodSpec{NodeName: "a"}}
	for _, tc := range []struct {
		name string
		fn   fwk.QueueingHintFn
		old  any
		new  any
		want fwk.QueueingHint
	}{
		{"a node Stevedore launched", onStevedoreNode, nil, ours, fwk.Queue},
		{"another node", onStevedoreNode, nil, theirs, fwk.QueueSkip},
		{"a bound pod leaving", fromStevedoreNode, bound, nil, fwk.Queue},
		{"an unbound pod leaving", fromStevedoreNode, &v1.Pod{}, nil, fwk.QueueSkip},
	} {
		got, err := tc.fn(klog.Background(), &v1.Pod{}, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := onStevedoreNode(klog.Background(), &v1.Pod{}, nil, "not a node"); err == nil {
		t.Error("a wrong object type is not an error")
	}
}
