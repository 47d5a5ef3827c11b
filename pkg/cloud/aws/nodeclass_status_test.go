/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

// TestAFailedPriceRefreshIsShownOnEveryEC2NodeClass: when refreshing instance types and prices fails, the
// EC2NodeClass says so in a condition (the prices read before stay in use, and the node class stays Ready) and
// one Warning event; retries that fail the same way write nothing; recovery is one write and a Normal event.
func TestAFailedPriceRefreshIsShownOnEveryEC2NodeClass(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.EmbeddedCatalog = false })
	ctx := testCtx(t)
	obj, _, err := f.classes.GetByKey("default")
	if err != nil {
		t.Fatal(err)
	}
	nc := obj.(*stevedorev1.EC2NodeClass).DeepCopy()
	client := fake.NewSimpleClientset(nc)
	factory := externalversions.NewSharedInformerFactory(client, 0)
	classes, claims := factory.Stevedore().V1().EC2NodeClasses(), factory.Stevedore().V1().NodeClaims()
	recorder := events.NewFakeRecorder(10)
	c := NewNodeClassStatus(f.provider, client, classes, claims, recorder)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	statusWrites := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	check := func(what string, wantOK bool, wantReason string, wantWrites int, wantEvent string) {
		t.Helper()
		before := statusWrites()
		if err := c.reconcile(ctx, "default"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		cur, err := client.StevedoreV1().EC2NodeClasses().Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(cur.Status.Conditions, ConditionInstanceCatalogReady)
		if cond == nil || (cond.Status == metav1.ConditionTrue) != wantOK || cond.Reason != wantReason {
			t.Fatalf("%s: condition %+v, want ok=%t reason %s", what, cond, wantOK, wantReason)
		}
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, stevedorev1.ConditionReady) {
			t.Errorf("%s: not Ready: %+v", what, meta.FindStatusCondition(cur.Status.Conditions, stevedorev1.ConditionReady))
		}
		if strings.Contains(strings.ToLower(cond.Message), "requestid") {
			t.Errorf("%s: the message carries a request ID: %s", what, cond.Message)
		}
		if got := statusWrites() - before; got != wantWrites {
			t.Errorf("%s: %d status writes, want %d", what, got, wantWrites)
		}
		select {
		case e := <-recorder.Events:
			if wantEvent == "" || !strings.HasPrefix(e, wantEvent) {
				t.Errorf("%s: event %q, want %q", what, e, wantEvent)
			}
		default:
			if wantEvent != "" {
				t.Errorf("%s: no event, want %q", what, wantEvent)
			}
		}
		t.Logf("%s: %s", what, cond.Message)
	}

	check("read from AWS", true, "ReadFromAWS", 1, "")
	f.emu.InjectFault(awsemu.Fault{Action: "AWSPriceListService.GetProducts", Code: "AccessDeniedException", Status: 400, Times: -1})
	f.clock.Step(CatalogRefreshInterval)
	check("refresh failed", false, "RefreshFailed", 1, "Warning InstanceCatalogRefreshFailed")
	f.clock.Step(CatalogRetryInterval)
	check("retry failed the same way", false, "RefreshFailed", 0, "")
	f.emu.ClearFaults()
	f.clock.Step(CatalogRetryInterval)
	check("recovered", true, "ReadFromAWS", 1, "Normal InstanceCatalogReadFromAWS")
}
