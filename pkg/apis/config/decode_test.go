/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, a ProvisionerArgs)
	}{
		{
			name: "defaults with the cluster name from the environment",
			env:  map[string]string{EnvClusterName: "prod", EnvRegion: "eu-west-1", EnvInterruptionQueue: "prod-interruptions"},
			check: func(t *testing.T, a ProvisionerArgs) {
				if a.ClusterName != "prod" || a.Region != "eu-west-1" || a.InterruptionQueue != "prod-interruptions" {
					t.Errorf("env not applied: %+v", a)
				}
				if a.BatchIdleDuration.Duration != time.Second || a.BatchMaxDuration.Duration != 10*time.Second {
					t.Errorf("batch defaults = %v / %v", a.BatchIdleDuration.Duration, a.BatchMaxDuration.Duration)
				}
				if a.RegistrationTimeout.Duration != 15*time.Minute || a.MaxInstanceTypes != 60 || *a.VMMemoryOverheadPercent != 7.5 ||
					*a.CostMetricsTop != 20 {
					t.Errorf("defaults not applied: %+v", a)
				}
				if a.RebalanceAction != "Event" {
					t.Errorf("rebalanceAction = %q, want Event (Karpenter's behaviour)", a.RebalanceAction)
				}
				if a.MinValuesPolicy != MinValuesStrict {
					t.Errorf("minValuesPolicy = %q, want Strict", a.MinValuesPolicy)
				}
			},
		},
		{
			name: "the file wins over the environment",
			raw:  `{"clusterName": "from-file", "batchIdleDuration": "250ms"}`,
			env:  map[string]string{EnvClusterName: "from-env"},
			check: func(t *testing.T, a ProvisionerArgs) {
				if a.ClusterName != "from-file" || a.BatchIdleDuration.Duration != 250*time.Millisecond {
					t.Errorf("got %+v", a)
				}
			},
		},
		{name: "YAML args", raw: "clusterName: c\nbatchMaxDuration: 30s\n", check: func(t *testing.T, a ProvisionerArgs) {
			if a.BatchMaxDuration.Duration != 30*time.Second {
				t.Errorf("batchMaxDuration = %v", a.BatchMaxDuration.Duration)
			}
		}},
		{name: "missing cluster name", raw: `{}`, wantErr: "clusterName: Required value"},
		{name: "misspelt field", raw: `{"clusterName": "c", "batchIdelDuration": "1s"}`, wantErr: `unknown field "batchIdelDuration"`},
		{name: "max window shorter than idle gap", raw: `{"clusterName": "c", "batchIdleDuration": "5s", "batchMaxDuration": "2s"}`, wantErr: "batchMaxDuration"},
		{name: "negative duration", raw: `{"clusterName": "c", "solveTimeout": "-1s"}`, wantErr: "solveTimeout"},
		{name: "permit wait above the scheduler's cap", raw: `{"clusterName": "c", "permitTimeout": "20m"}`, wantErr: "permitTimeout"},
		{name: "plain http endpoint", raw: `{"clusterName": "c", "clusterEndpoint": "http://x"}`, wantErr: "clusterEndpoint"},
		{name: "unknown rebalance action", raw: `{"clusterName": "c", "rebalanceAction": "Ignore"}`, wantErr: "rebalanceAction"},
		{name: "unknown minValues policy", raw: `{"clusterName": "c", "minValuesPolicy": "Lenient"}`, wantErr: "minValuesPolicy"},
		{name: "queue URL without a path", raw: `{"clusterName": "c", "interruptionQueue": "https://sqs.us-east-1.amazonaws.com/"}`, wantErr: "interruptionQueue"},
		{name: "cost metrics naming no namespace", raw: `{"clusterName": "c", "costMetricsTop": 0}`, wantErr: "costMetricsTop"},
		{name: "too many instance types", raw: `{"clusterName": "c", "maxInstanceTypes": 500}`, wantErr: "maxInstanceTypes"},
		{name: "overhead percentage out of range", raw: `{"clusterName": "c", "vmMemoryOverheadPercent": 60}`, wantErr: "vmMemoryOverheadPercent"},
		{name: "overhead as Karpenter's fraction", raw: `{"clusterName": "c", "vmMemoryOverheadPercent": 0.075}`, wantErr: "looks like Karpenter's fraction: write 7.5"},
		{name: "cluster name with a space", raw: `{"clusterName": "my cluster"}`, wantErr: "clusterName"},
		{name: "not an object", raw: `[1, 2]`, wantErr: "Provisioner args"},
		{name: "repair off by default, as Karpenter", raw: `{"clusterName": "c"}`, check: func(t *testing.T, a ProvisionerArgs) {
			if r := a.NodeRepair; r == nil || *r.Enabled {
				t.Errorf("repair arguments = %+v, want repair off", r)
			}
		}},
		{name: "repair turned on gets the default policies", raw: `{"clusterName": "c", "nodeRepair": {"enabled": true}}`, check: func(t *testing.T, a ProvisionerArgs) {
			r := a.NodeRepair
			if r == nil || !*r.Enabled || len(r.Policies) != 7 || r.MaxUnhealthyPercent != 20 || r.DrainTimeout.Duration != 5*time.Minute || r.RebootWait.Duration != 10*time.Minute {
				t.Errorf("repair arguments = %+v", r)
			}
		}},
		{name: "pod deletion cost on by default, off on request", raw: `{"clusterName": "c"}`, check: func(t *testing.T, a ProvisionerArgs) {
			if !*a.PodDeletionCost {
				t.Error("pod deletion cost steering is off by default")
			}
			off, err := Decode(&runtime.Unknown{Raw: []byte(`{"clusterName": "c", "podDeletionCost": false}`)}, nil)
			if err != nil || *off.PodDeletionCost {
				t.Errorf("podDeletionCost: false gives %v (err %v)", *off.PodDeletionCost, err)
			}
		}},
		{name: "surge on by default, off on request", raw: `{"clusterName": "c"}`, check: func(t *testing.T, a ProvisionerArgs) {
			if !*a.Surge {
				t.Error("surge is off by default")
			}
			off, err := Decode(&runtime.Unknown{Raw: []byte(`{"clusterName": "c", "surge": false}`)}, nil)
			if err != nil || *off.Surge {
				t.Errorf("surge: false gives %v (err %v)", *off.Surge, err)
			}
		}},
		{name: "shared capacity buffers and quotas on by default, off on request", raw: `{"clusterName": "c"}`, check: func(t *testing.T, a ProvisionerArgs) {
			if !*a.SharedCapacityBuffers || !*a.SharedCapacityQuotas {
				t.Error("autoscaling.x-k8s.io CapacityBuffers or CapacityQuotas are not served by default")
			}
			off, err := Decode(&runtime.Unknown{Raw: []byte(`{"clusterName": "c", "sharedCapacityBuffers": false, "sharedCapacityQuotas": false}`)}, nil)
			if err != nil || *off.SharedCapacityBuffers || *off.SharedCapacityQuotas {
				t.Errorf("sharedCapacityBuffers, sharedCapacityQuotas: false give %v, %v (err %v)", *off.SharedCapacityBuffers, *off.SharedCapacityQuotas, err)
			}
		}},
		{name: "repair off", raw: `{"clusterName": "c", "nodeRepair": {"enabled": false}}`, check: func(t *testing.T, a ProvisionerArgs) {
			if r := a.NodeRepair; *r.Enabled {
				t.Errorf("repair arguments = %+v, want it off", r)
			}
		}},
		{name: "repair policies replace the defaults", raw: `{"clusterName": "c", "nodeRepair": {"policies": [{"conditionType": "Ready", "conditionStatus": "Unknown", "toleration": "2m"}, {"conditionType": "KernelReady", "conditionStatus": "False", "toleration": "1m", "reboot": true}]}}`,
			check: func(t *testing.T, a ProvisionerArgs) {
				r := a.NodeRepair
				if len(r.Policies) != 2 || r.Policies[0].Toleration.Duration != 2*time.Minute || !r.Policies[1].Reboot || r.Policies[1].ConditionType != "KernelReady" {
					t.Errorf("policies = %+v", r.Policies)
				}
			}},
		{name: "repair policy without a toleration", raw: `{"clusterName": "c", "nodeRepair": {"policies": [{"conditionType": "Ready", "conditionStatus": "False"}]}}`, wantErr: "nodeRepair.policies[0].toleration"},
		{name: "repair policy with an unknown status", raw: `{"clusterName": "c", "nodeRepair": {"policies": [{"conditionType": "Ready", "conditionStatus": "Maybe", "toleration": "1m"}]}}`, wantErr: "nodeRepair.policies[0].conditionStatus"},
		{name: "repair policy for a healthy node", raw: `{"clusterName": "c", "nodeRepair": {"policies": [{"conditionType": "Ready", "conditionStatus": "True", "toleration": "1m"}]}}`, wantErr: "nodeRepair.policies[0].conditionStatus"},
		{name: "repair policy twice", raw: `{"clusterName": "c", "nodeRepair": {"policies": [{"conditionType": "Ready", "conditionStatus": "False", "toleration": "1m"}, {"conditionType": "Ready", "conditionStatus": "False", "toleration": "2m"}]}}`, wantErr: "nodeRepair.policies[1]"},
		{name: "the admission webhook off by default", raw: `{"clusterName": "c"}`, check: func(t *testing.T, a ProvisionerArgs) {
			if a.AdmissionWebhook != nil {
				t.Errorf("admissionWebhook = %+v, want off", a.AdmissionWebhook)
			}
		}},
		{name: "the admission webhook with its defaults", raw: `{"clusterName": "c", "admissionWebhook": {}}`, env: map[string]string{EnvNamespace: "autoscaling"},
			check: func(t *testing.T, a ProvisionerArgs) {
				want := AdmissionWebhookArgs{Port: 9443, Namespace: "autoscaling", Service: "stevedore-webhook", Secret: "stevedore-webhook-cert",
					Configuration: "stevedore-scheduling"}
				if a.AdmissionWebhook == nil || *a.AdmissionWebhook != want {
					t.Errorf("admissionWebhook = %+v, want %+v", a.AdmissionWebhook, want)
				}
			}},
		{name: "the admission webhook turned on by the environment", raw: `{"clusterName": "c"}`, env: map[string]string{EnvAdmissionWebhookPort: "8443"},
			check: func(t *testing.T, a ProvisionerArgs) {
				if a.AdmissionWebhook == nil || a.AdmissionWebhook.Port != 8443 || a.AdmissionWebhook.Namespace != "stevedore" {
					t.Errorf("admissionWebhook = %+v, want on at 8443 in namespace stevedore", a.AdmissionWebhook)
				}
			}},
		{name: "the admission webhook's port from the environment is not a number", raw: `{"clusterName": "c"}`,
			env: map[string]string{EnvAdmissionWebhookPort: "https"}, wantErr: "admissionWebhook.port"},
		{name: "the admission webhook's port out of range", raw: `{"clusterName": "c", "admissionWebhook": {"port": 70000}}`, wantErr: "admissionWebhook.port"},
		{name: "the admission webhook's Service is not a name", raw: `{"clusterName": "c", "admissionWebhook": {"service": "Web Hook"}}`, wantErr: "admissionWebhook.service"},
		{name: "repair percentage out of range", raw: `{"clusterName": "c", "nodeRepair": {"maxUnhealthyPercent": 101}}`, wantErr: "nodeRepair.maxUnhealthyPercent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj runtime.Object
			if tc.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tc.raw)}
			}
			a, err := Decode(obj, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, a)
		})
	}
}

// TestEveryArgumentIsInTheReference: each field of ProvisionerArgs (and of nodeRepair) has its row in the plugin-argument
// table of docs/configuration.md, and each row there is a field, so the reference and the code stay in step.
func TestEveryArgumentIsInTheReference(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## Plugin arguments")
	if start < 0 {
		t.Fatal("docs/configuration.md has no section Plugin arguments")
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	want := map[string]bool{}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
				walk(prefix+name+".", f.Type.Elem()) // a group of arguments: a row per field
				continue
			}
			want[prefix+name] = true
		}
	}
	walk("", reflect.TypeFor[ProvisionerArgs]())
	for name := range want {
		if !strings.Contains(section, "| `"+name+"` |") {
			t.Errorf("argument %s has no row in docs/configuration.md", name)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\|").FindAllStringSubmatch(section, -1) {
		if !want[m[1]] {
			t.Errorf("docs/configuration.md documents %s, which is not an argument", m[1])
		}
	}
}
