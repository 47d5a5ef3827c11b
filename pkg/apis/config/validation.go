/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validate reports the invalid fields of defaulted webhook arguments (none when the webhook is off).
func (w *AdmissionWebhookArgs) validate(path *field.Path) field.ErrorList {
	if w == nil {
		return nil
	}
	var errs field.ErrorList
	if w.Port < 1 || w.Port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), w.Port, "must be a port number, 1 to 65535 (from $"+EnvAdmissionWebhookPort+" when the argument is not set)"))
	}
	for _, n := range []struct{ name, value string }{{"namespace", w.Namespace}, {"service", w.Service}, {"secret", w.Secret},
		{"configuration", w.Configuration}} {
		for _, msg := range validation.IsDNS1123Subdomain(n.value) {
			errs = append(errs, field.Invalid(path.Child(n.name), n.value, msg))
		}
	}
	return errs
}

// validate reports the invalid fields of defaulted repair arguments.
func (r *NodeRepairArgs) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.MaxUnhealthyPercent < 1 || r.MaxUnhealthyPercent > 100 {
		errs = append(errs, field.Invalid(path.Child("maxUnhealthyPercent"), r.MaxUnhealthyPercent, "must be between 1 and 100"))
	}
	if r.DrainTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("drainTimeout"), r.DrainTimeout.Duration.String(), "must be positive"))
	}
	if r.RebootWait.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("rebootWait"), r.RebootWait.Duration.String(), "must be positive"))
	}
	seen := map[string]bool{}
	for i, p := range r.Policies {
		pp := path.Child("policies").Index(i)
		if p.ConditionType == "" {
			errs = append(errs, field.Required(pp.Child("conditionType"), "a node condition type, such as Ready or KernelReady"))
		}
		switch p.ConditionStatus {
		case string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown):
		default:
			errs = append(errs, field.NotSupported(pp.Child("conditionStatus"), p.ConditionStatus,
				[]string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}))
		}
		if p.ConditionType == string(corev1.NodeReady) && p.ConditionStatus == string(corev1.ConditionTrue) {
			errs = append(errs, field.Invalid(pp.Child("conditionStatus"), p.ConditionStatus, "Ready True is a healthy node"))
		}
		if p.Toleration.Duration <= 0 {
			errs = append(errs, field.Invalid(pp.Child("toleration"), p.Toleration.Duration.String(), "must be positive"))
		}
		key := p.ConditionType + "=" + p.ConditionStatus
		if seen[key] {
			errs = append(errs, field.Duplicate(pp, key))
		}
		seen[key] = true
	}
	return errs
}

// Validate reports every invalid field of defaulted arguments, each error naming its field.
func (a ProvisionerArgs) Validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, a.validateCluster()...)
	errs = append(errs, a.validateDurations()...)
	errs = append(errs, a.validateChoices()...)
	errs = append(errs, a.NodeRepair.validate(field.NewPath("nodeRepair"))...)
	errs = append(errs, a.AdmissionWebhook.validate(field.NewPath("admissionWebhook"))...)
	for i, m := range a.GitOpsFieldManagers {
		if m == "" || len(m) > 128 {
			errs = append(errs, field.Invalid(field.NewPath("gitOpsFieldManagers").Index(i), m, "must be a field manager's name, 1 to 128 characters"))
		}
	}
	return errs
}

// validateCluster checks the cluster's name, endpoint and interruption queue.
func (a ProvisionerArgs) validateCluster() field.ErrorList {
	var errs field.ErrorList
	if a.ClusterName == "" {
		errs = append(errs, field.Required(field.NewPath("clusterName"), "set it, or $"+EnvClusterName))
	} else if len(a.ClusterName) > 100 || strings.ContainsAny(a.ClusterName, " /\t") {
		errs = append(errs, field.Invalid(field.NewPath("clusterName"), a.ClusterName, "must be an EKS cluster name"))
	}
	if a.ClusterEndpoint != "" {
		if u, err := url.Parse(a.ClusterEndpoint); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, field.Invalid(field.NewPath("clusterEndpoint"), a.ClusterEndpoint, "must be an https:// URL"))
		}
	}
	if q := a.InterruptionQueue; strings.Contains(q, "://") {
		if u, err := url.Parse(q); err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			errs = append(errs, field.Invalid(field.NewPath("interruptionQueue"), q, "must be an SQS queue URL or a queue name"))
		}
	}
	return errs
}

// validateDurations checks that every duration is positive, and the bounds some have.
func (a ProvisionerArgs) validateDurations() field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		d    metav1.Duration
	}{
		{"batchIdleDuration", a.BatchIdleDuration}, {"batchMaxDuration", a.BatchMaxDuration}, {"solveTimeout", a.SolveTimeout},
		{"registrationTimeout", a.RegistrationTimeout}, {"permitTimeout", a.PermitTimeout},
		{"disruptionPollInterval", a.DisruptionPollInterval}, {"disruptionValidationDelay", a.DisruptionValidationDelay},
		{"garbageCollectionInterval", a.GarbageCollectionInterval}, {"spotInterruptionNotice", a.SpotInterruptionNotice},
		{"kubernetesVersionCheckInterval", a.KubernetesVersionCheckInterval},
		{"provisioningRequestBookingTime", a.ProvisioningRequestBookingTime},
	} {
		if d.d.Duration <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.name), d.d.Duration.String(), "must be positive"))
		}
	}
	if a.BatchMaxDuration.Duration < a.BatchIdleDuration.Duration {
		errs = append(errs, field.Invalid(field.NewPath("batchMaxDuration"), a.BatchMaxDuration.Duration.String(),
			"must not be shorter than batchIdleDuration ("+a.BatchIdleDuration.Duration.String()+")"))
	}
	if a.PermitTimeout.Duration > MaxPermitTimeout {
		errs = append(errs, field.Invalid(field.NewPath("permitTimeout"), a.PermitTimeout.Duration.String(),
			"must be at most 15m, the scheduler's cap on Permit waits"))
	}
	return errs
}

// validateChoices checks the numbers and the choices among fixed values.
func (a ProvisionerArgs) validateChoices() field.ErrorList {
	var errs field.ErrorList
	if a.CostMetricsTop != nil && (*a.CostMetricsTop < 1 || *a.CostMetricsTop > 1000) {
		errs = append(errs, field.Invalid(field.NewPath("costMetricsTop"), *a.CostMetricsTop, "must be between 1 and 1000"))
	}
	if a.MaxInstanceTypes < 1 || a.MaxInstanceTypes > 200 {
		errs = append(errs, field.Invalid(field.NewPath("maxInstanceTypes"), a.MaxInstanceTypes, "must be between 1 and 200"))
	}
	switch p := *a.VMMemoryOverheadPercent; {
	case p < 0 || p >= 50:
		errs = append(errs, field.Invalid(field.NewPath("vmMemoryOverheadPercent"), p, "must be at least 0 and below 50"))
	case p > 0 && p < 1:
		// Karpenter's VM_MEMORY_OVERHEAD_PERCENT is a fraction (0.075); here it is a percent (7.5)
		errs = append(errs, field.Invalid(field.NewPath("vmMemoryOverheadPercent"), p, fmt.Sprintf(
			"is a percent (7.5 means 7.5%%); %g looks like Karpenter's fraction: write %g, or 0 for no overhead", p, p*100)))
	}
	if !slices.Contains(RebalanceActions(), a.RebalanceAction) {
		errs = append(errs, field.NotSupported(field.NewPath("rebalanceAction"), a.RebalanceAction,
			RebalanceActions()))
	}
	if a.MinValuesPolicy != MinValuesStrict && a.MinValuesPolicy != MinValuesBestEffort {
		errs = append(errs, field.NotSupported(field.NewPath("minValuesPolicy"), a.MinValuesPolicy,
			[]string{MinValuesStrict, MinValuesBestEffort}))
	}
	return errs
}
