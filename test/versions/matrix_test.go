/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package versions runs Stevedore (kube-scheduler 1.37 with its plugins, in the test process) against the API
// servers and controllers of every Kubernetes minor it supports: the one it is built on in the test process, the
// others from their own binaries (hack/kube/<minor>, `make kube-binaries`). The matrix below is the one source of
// what runs and of the table in docs/compatibility.md.
package versions

import (
	"fmt"
	"strings"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// minor is a Kubernetes minor version the matrix runs Stevedore against, and what to expect of it.
type minor struct {
	// Version is "1.34"; Patch the release tested ("v1.34.4").
	Version, Patch string
	// External: its kube-apiserver and kube-controller-manager run from $STEVEDORE_KUBE_BINARIES/<Version>; else
	// they are the ones Stevedore is built on, in the test process.
	External bool
	// Admission is what keeps Karpenter off Stevedore's pods and opts namespaces in there (sandbox.AdmissionPolicy
	// or sandbox.AdmissionWebhook).
	Admission string
	// TurnedOff are the scheduler features Stevedore turns off because the API server does not serve their API.
	TurnedOff []string
	// Gangs: the API server can serve the Workload API's PodGroups (scheduling.k8s.io/v1beta1, turned on), and
	// the GangScheduling plugin holds a gang's pods until it is complete.
	Gangs bool
	// Lacks says, for the docs, what Stevedore cannot use there.
	Lacks string
}

// featureDeviceTaintRules is the kube-scheduler 1.37 feature whose API servers before 1.37 lack.
const featureDeviceTaintRules = "DRADeviceTaintRules"

// matrix is every minor Stevedore supports, newest first.
func matrix() []minor {
	return []minor{
		{Version: "1.37", Patch: "v1.37.2", Admission: sandbox.AdmissionPolicy, Gangs: true},
		{Version: "1.36", Patch: "v1.36.3", External: true, Admission: sandbox.AdmissionPolicy,
			TurnedOff: []string{featureDeviceTaintRules},
			Lacks:     "DRA device taint rules (resource.k8s.io/v1 DeviceTaintRules); the Workload API only in v1alpha2, which kube-scheduler 1.37 does not read"},
		{Version: "1.35", Patch: "v1.35.4", External: true, Admission: sandbox.AdmissionWebhook,
			TurnedOff: []string{featureDeviceTaintRules},
			Lacks:     "MutatingAdmissionPolicy (beta, off): Stevedore's admission webhook takes its place; DRA device taint rules; the Workload API only in v1alpha1"},
		{Version: "1.34", Patch: "v1.34.4", External: true, Admission: sandbox.AdmissionWebhook,
			TurnedOff: []string{featureDeviceTaintRules},
			Lacks:     "MutatingAdmissionPolicy (beta, off): Stevedore's admission webhook takes its place; DRA device taint rules; no Workload API"},
	}
}

// checks are what the matrix runs on each minor: every one with `make test-versions`, the smoke ones in
// `make test`.
func checks() []check {
	return []check{
		{Name: "provisioning", Smoke: true, Run: checkProvisioning,
			Says: "pending pods launch nodes with the minor's EKS-optimized AMIs; the pods bind and run"},
		{Name: "admission", Smoke: true, Run: checkAdmission,
			Says: "namespaces opt in and Karpenter is kept off Stevedore's pods, those a webhook of the user's gives the stevedore scheduler too"},
		{Name: "features", Smoke: true, Run: checkFeatures,
			Says: "the scheduler starts, with the features the API server has no API for turned off"},
		{Name: "consolidation", Run: checkConsolidation, Says: "an underused node is consolidated away"},
		{Name: "interruption", Run: checkInterruption, Says: "a spot interruption moves the pods to a replacement"},
		{Name: "down", Smoke: true, Run: checkDown, OwnSandbox: true,
			Says: "with Stevedore stopped, pods of an opted-in namespace are still created: where a MutatingAdmissionPolicy opts them in they wait Pending for Stevedore, where its admission webhook would they go to the default scheduler"},
		{Name: "gangs", Smoke: true, Run: checkGangs, Only: func(m minor) bool { return m.Gangs }, OwnSandbox: true,
			Says: "a Workload API PodGroup's pods wait until the gang is complete, are planned whole (nothing is launched while only part of the gang fits), then launch and bind together"},
	}
}

// docsTable is the table of docs/compatibility.md that lists the matrix.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| Kubernetes | tested | control plane in the tests | opt-in and Karpenter guard | turned off | gangs (Workload API) | lacks |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, m := range matrix() {
		plane := "in the test process"
		if m.External {
			plane = "its own binaries (`hack/kube/" + m.Version + "`)"
		}
		admission := "MutatingAdmissionPolicy"
		if m.Admission == sandbox.AdmissionWebhook {
			admission = "admission webhook"
		}
		off := "-"
		if len(m.TurnedOff) > 0 {
			off = "`" + strings.Join(m.TurnedOff, "`, `") + "`"
		}
		gangs := "no"
		if m.Gangs {
			gangs = "yes, with the API turned on"
		}
		lacks := m.Lacks
		if lacks == "" {
			lacks = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", m.Version, m.Patch, plane, admission, off, gangs, lacks)
	}
	b.WriteString("\nWhat runs on each (`make test-versions` runs every check on every minor; `make test` the smoke ones):\n\n")
	for _, c := range checks() {
		smoke := ""
		if c.Smoke {
			smoke = " (smoke)"
		}
		fmt.Fprintf(&b, "- **%s**%s: %s\n", c.Name, smoke, c.Says)
	}
	b.WriteString("- **upgrade** (in `make test` too): the control plane upgraded from 1.36 to 1.37 under a running Stevedore: new nodes " +
		"launch with 1.37's AMIs and the nodes launched with 1.36's drift and are replaced\n")
	return b.String()
}
