{{- /* How pods opt in and are kept off Karpenter's nodes: Policy (the MutatingAdmissionPolicy, Kubernetes 1.36 and
newer) or Webhook (Stevedore's admission webhook, for 1.34 and 1.35). Auto picks by the cluster's version. */ -}}
{{- define "stevedore.admissionMode" -}}
{{- $mode := .Values.schedulingPolicy.mode | default "Auto" -}}
{{- if not (has $mode (list "Auto" "Policy" "Webhook")) -}}
{{- fail (printf "schedulingPolicy.mode must be Auto, Policy or Webhook, not %q" $mode) -}}
{{- end -}}
{{- if eq $mode "Auto" -}}
{{- if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version -}}Policy{{- else -}}Webhook{{- end -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}
