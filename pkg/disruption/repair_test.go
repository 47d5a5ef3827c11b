/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// faulty makes a machine's node report a condition with a status since t0-ago (Ready True otherwise).
func faulty(cond corev1.NodeConditionType, status corev1.ConditionStatus, ago time.Duration) func(*machine) {
	return func(m *machine) {
		m.node = func(w *test.NodeWrapper) {
			since := metav1.NewTime(t0.Add(-ago))
			w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if cond == corev1.NodeReady {
				w.Status.Conditions = nil
			}
			w.Status.Conditions = append(w.Status.Conditions, corev1.NodeCondition{Type: cond, Status: status, LastTransitionTime: since})
		}
	}
}

// healthy is a machine whose node is Ready.
func healthy(m *machine) {
	m.node = func(w *test.NodeWrapper) { w.Ready(corev1.ConditionTrue) }
}

// fleetOf returns n healthy m5.large machines of NodePool default named n1..nN, those given faulty.
func fleetOf(n int, faults map[int]func(*machine)) []machine {
	ms := machines("n", "default", n, healthy)
	for i, f := range faults {
		f(&ms[i-1])
	}
	return ms
}

// repairOn turns repair on with the default policies and options.
func repairOn(cfg harnessConfig) harnessConfig {
	prev := cfg.opts
	cfg.opts = func(o *Options) {
		o.Args.NodeRepair = &config.NodeRepairArgs{Enabled: ptr.To(true)}
		if prev != nil {
			prev(o)
		}
	}
	return cfg
}

// withInstances registers each machine's instance in the fake cloud, so that it can be rebooted.
func withInstances(ms []machine) harnessConfig {
	return harnessConfig{cloud: func(p *fake.Provider) {
		for _, m := range ms {
			p.AddInstance(cloud.Instance{ID: "i-" + m.name, Type: m.typ, Zone: testZone, CapacityType: onDemand,
				State: cloud.StateRunning})
		}
	}}
}

func TestRepairPolicies(t *testing.T) {
	unknown := func(ago time.Duration) func(*machine) { return faulty(corev1.NodeReady, corev1.ConditionUnknown, ago) }
	notReady := func(ago time.Duration) func(*machine) { return faulty(corev1.NodeReady, corev1.ConditionFalse, ago) }
	kernel := func(ago time.Duration) func(*machine) {
		return faulty(ConditionKernelReady, corev1.ConditionFalse, ago)
	}
	repairing := func(m *machine) {
		healthy(m)
		m.claim = func(w *test.NodeClaimWrapper) {
			w.Deleting(t0.Add(-time.Minute))
			w.Status.DisruptionReason = string(ReasonUnhealthy)
		}
	}
	rebooted := func(ago time.Duration) func(*machine) {
		return func(m *machine) {
			kernel(time.Hour)(m)
			m.claim = func(w *test.NodeClaimWrapper) {
				w.Annotations(AnnotationRepairReboot, t0.Add(-ago).Format(time.RFC3339))
			}
		}
	}
	forceful := func(t *testing.T, _ *harness, cmd *Command) {
		if !cmd.Forceful || cmd.Reason != ReasonUnhealthy || cmd.DrainTimeout != config.DefaultRepairDrainTimeout {
			t.Errorf("forceful %v, reason %s, drain timeout %s; want a forceful %s command draining within %s",
				cmd.Forceful, cmd.Reason, cmd.DrainTimeout, ReasonUnhealthy, config.DefaultRepairDrainTimeout)
		}
	}
	noWait := func(want bool) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, _ *harness, cmd *Command) {
			got := cmd.ReplacementWait != nil && *cmd.ReplacementWait == 0
			if got != want {
				t.Errorf("replacements not waited for = %v, want %v", got, want)
			}
		}
	}
	reboots := func(want ...string) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, h *harness, _ *Command) {
			var got []string
			for _, c := range h.Cloud.Calls() {
				if id, ok := strings.CutPrefix(c, fake.CallReboot+" "); ok {
					got = append(got, id)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("reboots = %v, want %v", got, want)
			}
			for _, id := range want {
				if cl := h.claim("claim-" + strings.TrimPrefix(id, "i-")); cl.Annotations[AnnotationRepairReboot] == "" {
					t.Errorf("NodeClaim of %s does not record the reboot", id)
				}
			}
		}
	}
	blockedEvent := func(want bool) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, h *harness, _ *Command) {
			got := false
			for len(h.Recorder.Events) > 0 {
				if e := <-h.Recorder.Events; strings.Contains(e, ReasonNodeRepairBlocked) {
					got = true
				}
			}
			if got != want {
				t.Errorf("NodeRepairBlocked event = %v, want %v", got, want)
			}
		}
	}
	kernelFleet := fleetOf(5, map[int]func(*machine){1: kernel(time.Hour)})
	cases := []methodCase{
		{
			name:  "Ready Unknown past 30m is replaced at once; healthy nodes stay",
			objs:  objects(pool(), fleetOf(5, map[int]func(*machine){2: unknown(31 * time.Minute)})),
			want:  []string{"n2"},
			check: checks(forceful, noWait(true), blockedEvent(false)),
		},
		{
			name: "within the toleration window nothing happens",
			objs: objects(pool(), fleetOf(5, map[int]func(*machine){2: unknown(29 * time.Minute), 3: notReady(10 * time.Minute)})),
		},
		{
			name:  "Ready False is replaced too",
			objs:  objects(pool(), fleetOf(5, map[int]func(*machine){4: notReady(45 * time.Minute)})),
			want:  []string{"n4"},
			check: checks(forceful),
		},
		{
			name: "AcceleratedHardwareReady has a 10m window; pods still served: replacements are waited for",
			objs: objects(pool(), fleetOf(5, map[int]func(*machine){1: faulty(ConditionAcceleratedHardwareReady, corev1.ConditionFalse, 11*time.Minute)}),
				pod("web", "n1", "500m", "512Mi")),
			want:  []string{"n1"},
			check: checks(forceful, noWait(false)),
		},
		{
			name:  "a third of the NodePool unhealthy: repair waits (more than 20%)",
			objs:  objects(pool(), fleetOf(6, map[int]func(*machine){1: unknown(time.Hour), 2: unknown(time.Hour)})),
			check: blockedEvent(true),
		},
		{
			name: "15 nodes, 1 being repaired, 2 unhealthy: both (3 of 15 is 20%)",
			objs: objects(pool(), fleetOf(15, map[int]func(*machine){1: repairing, 3: unknown(time.Hour), 7: unknown(2 * time.Hour)})),
			want: []string{"n3", "n7"},
		},
		{
			name: "10 nodes, 2 unhealthy: both (20%)",
			objs: objects(pool(), fleetOf(10, map[int]func(*machine){3: unknown(time.Hour), 7: unknown(2 * time.Hour)})),
			want: []string{"n3", "n7"},
		},
		{
			name: "10 nodes, one being repaired: one more",
			objs: objects(pool(), fleetOf(10, map[int]func(*machine){1: repairing, 7: unknown(2 * time.Hour)})),
			want: []string{"n7"},
		},
		{
			name:  "10 nodes, one being repaired and two unhealthy: three is more than 20%",
			objs:  objects(pool(), fleetOf(10, map[int]func(*machine){1: repairing, 2: unknown(time.Hour), 3: unknown(time.Hour), 4: notReady(time.Minute)})),
			check: blockedEvent(true),
		},
		{
			name: "a NodePool of one node: the node is repaired",
			objs: objects(pool(), fleetOf(1, map[int]func(*machine){1: unknown(time.Hour)})),
			want: []string{"n1"},
		},
		{
			name: "do-not-disrupt does not hold repair back",
			objs: objects(pool(), fleetOf(5, map[int]func(*machine){1: func(m *machine) {
				unknown(time.Hour)(m)
				node := m.node
				m.node = func(w *test.NodeWrapper) { node(w); w.Annotations(stevedorev1.DoNotDisruptKey, "true") }
			}})),
			want: []string{"n1"},
		},
		{
			name:  "KernelReady False on a reporting node: rebooted first, no command",
			cfg:   withInstances(kernelFleet),
			objs:  objects(pool(), kernelFleet),
			check: reboots("i-n1"),
		},
		{
			name:  "rebooted and still faulty within the reboot wait: nothing",
			objs:  objects(pool(), fleetOf(5, map[int]func(*machine){1: rebooted(5 * time.Minute)})),
			check: reboots(),
		},
		{
			name:  "rebooted and still faulty after the reboot wait: replaced, not rebooted again",
			objs:  objects(pool(), fleetOf(5, map[int]func(*machine){1: rebooted(11 * time.Minute)})),
			want:  []string{"n1"},
			check: reboots(),
		},
		{
			name: "a kernel fault on a silent node is replaced (a reboot cannot be seen to work)",
			objs: objects(pool(), fleetOf(5, map[int]func(*machine){1: func(m *machine) {
				m.node = func(w *test.NodeWrapper) {
					since := metav1.NewTime(t0.Add(-time.Hour))
					w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: since},
						{Type: ConditionKernelReady, Status: corev1.ConditionFalse, LastTransitionTime: since}}
				}
			}})),
			want:  []string{"n1"},
			check: reboots(),
		},
		{
			name:  "a reboot the cloud refuses: replaced instead",
			objs:  objects(pool(), fleetOf(5, map[int]func(*machine){1: kernel(time.Hour)})), // no instance in the cloud
			want:  []string{"n1"},
			check: reboots("i-n1"), // tried
		},
	}
	for i := range cases {
		cases[i].cfg = repairOn(cases[i].cfg)
	}
	runMethodCases(t, MethodRepair, cases)
}

func TestRepairThreshold(t *testing.T) {
	for _, tc := range []struct{ total, pct, want int }{
		{1, 20, 1}, {3, 20, 1}, {5, 20, 1}, {6, 20, 1}, {9, 20, 1}, {10, 20, 2}, {14, 20, 2}, {15, 20, 3}, {100, 20, 20},
		{10, 50, 5}, {0, 20, 1},
	} {
		if got := repairThreshold(tc.total, tc.pct); got != tc.want {
			t.Errorf("repairThreshold(%d, %d) = %d, want %d", tc.total, tc.pct, got, tc.want)
		}
	}
}

func TestRepairPolicyChoosesTheFaultDueFirst(t *testing.T) {
	o := repairOptions(config.ProvisionerArgs{NodeRepair: &config.NodeRepairArgs{Enabled: ptr.To(true)}}.Defaults(nil).NodeRepair)
	node := test.Node("n").Obj()
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: ConditionKernelReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-20 * time.Minute))},
		{Type: ConditionAcceleratedHardwareReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-5 * time.Minute))},
	}
	f := o.fault(node)
	if f == nil || f.policy.ConditionType != ConditionAcceleratedHardwareReady || !f.due().Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("fault = %+v, want AcceleratedHardwareReady due at t0+5m (before KernelReady at t0+10m)", f)
	}
	node.Status.Conditions = node.Status.Conditions[:1]
	if f := o.fault(node); f != nil {
		t.Errorf("a Ready node has fault %+v", f)
	}
	if got := fmt.Sprint(len(o.Policies)); got != "7" {
		t.Errorf("%s default policies", got)
	}
}

// TestRepairOptionsFromArguments: repair reads the nodeRepair arguments, defaulted, and is off unless enabled.
func TestRepairOptionsFromArguments(t *testing.T) {
	decode := func(raw string) *RepairOptions {
		t.Helper()
		a, err := config.Decode(&runtime.Unknown{Raw: []byte(raw)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return repairOptions(a.NodeRepair)
	}
	for _, tc := range []struct {
		name string
		args string
		want *RepairOptions
	}{
		{name: "off by default", args: `{"clusterName": "c"}`},
		{name: "off when disabled", args: `{"clusterName": "c", "nodeRepair": {"enabled": false}}`},
		{name: "on with the defaults", args: `{"clusterName": "c", "nodeRepair": {"enabled": true}}`,
			want: &RepairOptions{Policies: repairOptions(config.ProvisionerArgs{NodeRepair: &config.NodeRepairArgs{Enabled: ptr.To(true)}}.Defaults(nil).NodeRepair).Policies,
				MaxUnhealthyPercent: 20, DrainTimeout: 5 * time.Minute, RebootWait: 10 * time.Minute}},
		{name: "policies of its own", args: `{"clusterName": "c", "nodeRepair": {"enabled": true, "maxUnhealthyPercent": 50, "policies": [` +
			`{"conditionType": "Ready", "conditionStatus": "Unknown", "toleration": "2m"}, ` +
			`{"conditionType": "KernelReady", "conditionStatus": "False", "toleration": "1m", "reboot": true}]}}`,
			want: &RepairOptions{Policies: []RepairPolicy{
				{ConditionType: corev1.NodeReady, Status: corev1.ConditionUnknown, Toleration: 2 * time.Minute},
				{ConditionType: ConditionKernelReady, Status: corev1.ConditionFalse, Toleration: time.Minute, Reboot: true}},
				MaxUnhealthyPercent: 50, DrainTimeout: 5 * time.Minute, RebootWait: 10 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decode(tc.args)); diff != "" {
				t.Errorf("repair options (-want +got):\n%s", diff)
			}
		})
	}
}
