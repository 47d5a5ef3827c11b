package provisioner

import (
	"testing"

	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestQueueingHintsRequeueOnlyForEventsThatMayHelp(t *testing.T) {
	ours := test.Node("a").Labels(stevedorev1.LabelNodePool, "np").Obj()
	theirs := test.Node("b").Obj()
	bound := test.Pod("bound").Node("a").Obj()
	unbound := test.Pod("unbound").Pending().Obj()
	pending := test.Pod("pending").Pending().Obj()
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
		{"an unbound pod leaving", fromStevedoreNode, unbound, nil, fwk.QueueSkip},
	} {
		got, err := tc.fn(klog.Background(), pending, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := onStevedoreNode(klog.Background(), pending, nil, "not a node"); err == nil {
		t.Error("a wrong object type is not an error")
	}
}
