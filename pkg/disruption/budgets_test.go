/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func budget(nodes string, schedule string, duration time.Duration, reasons ...stevedorev1.DisruptionReason) stevedorev1.Budget {
	b := stevedorev1.Budget{Nodes: nodes, Reasons: reasons}
	if schedule != "" {
		b.Schedule = &schedule
		b.Duration = &metav1.Duration{Duration: duration}
	}
	return b
}

func TestAllowedDisruptions(t *testing.T) {
	// 2026-11-25 is a Wednesday.
	noon := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		budgets []stevedorev1.Budget
		reason  stevedorev1.DisruptionReason
		total   int
		now     time.Time
		want    int
		wantErr bool
	}{
		{name: "10% of 25 rounds up to 3", budgets: []stevedorev1.Budget{budget("10%", "", 0)}, reason: stevedorev1.DisruptionReasonEmpty, total: 25, now: noon, want: 3},
		{name: "a count", budgets: []stevedorev1.Budget{budget("1", "", 0)}, reason: stevedorev1.DisruptionReasonDrifted, total: 25, now: noon, want: 1},
		{name: "0% blocks", budgets: []stevedorev1.Budget{budget("0%", "", 0)}, reason: stevedorev1.DisruptionReasonEmpty, total: 25, now: noon, want: 0},
		{name: "the most restrictive wins", budgets: []stevedorev1.Budget{budget("50%", "", 0), budget("2", "", 0)}, reason: stevedorev1.DisruptionReasonEmpty, total: 40, now: noon, want: 2},
		{name: "a budget for other reasons does not apply",
			budgets: []stevedorev1.Budget{budget("50%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonDrifted)},
			reason:  stevedorev1.DisruptionReasonEmpty, total: 10, now: noon, want: 5},
		{name: "a budget for this reason applies",
			budgets: []stevedorev1.Budget{budget("50%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonDrifted)},
			reason:  stevedorev1.DisruptionReasonDrifted, total: 10, now: noon, want: 0},
		{name: "scheduled budget active within its window",
			budgets: []stevedorev1.Budget{budget("100%", "", 0), budget("0", "0 9 * * *", 8*time.Hour)},
			reason:  stevedorev1.DisruptionReasonUnderutilized, total: 10, now: noon, want: 0},
		{name: "scheduled budget inactive after its window",
			budgets: []stevedorev1.Budget{budget("100%", "", 0), budget("0", "0 9 * * *", 2*time.Hour)},
			reason:  stevedorev1.DisruptionReasonUnderutilized, total: 10, now: noon, want: 10},
		{name: "window crossing midnight from yesterday's firing",
			budgets: []stevedorev1.Budget{budget("0", "0 22 * * *", 4*time.Hour)},
			reason:  stevedorev1.DisruptionReasonEmpty, total: 10, now: time.Date(2026, 11, 25, 1, 30, 0, 0, time.UTC), want: 0},
		{name: "weekday schedule on the wrong day",
			budgets: []stevedorev1.Budget{budget("0", "0 0 * * mon-fri", 24*time.Hour)},
			reason:  stevedorev1.DisruptionReasonEmpty, total: 10, now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), want: maxInt()},
		{name: "@daily descriptor", budgets: []stevedorev1.Budget{budget("1", "@daily", time.Hour)}, reason: stevedorev1.DisruptionReasonEmpty,
			total: 10, now: time.Date(2026, 11, 25, 0, 30, 0, 0, time.UTC), want: 1},
		{name: "unparseable schedule allows nothing", budgets: []stevedorev1.Budget{budget("100%", "every day", time.Hour)},
			reason: stevedorev1.DisruptionReasonEmpty, total: 10, now: noon, want: 0, wantErr: true},
		{name: "no budgets is unbounded", budgets: nil, reason: stevedorev1.DisruptionReasonEmpty, total: 10, now: noon, want: maxInt()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := test.NodePool("np").Budgets(tc.budgets...).Obj()
			got, err := allowedDisruptions(np, tc.reason, tc.total, tc.now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("allowed = %d, want %d", got, tc.want)
			}
		})
	}
}

func maxInt() int { return int(^uint(0) >> 1) }
