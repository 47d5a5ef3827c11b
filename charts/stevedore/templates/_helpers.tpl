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

{{- /* The ServiceAccount the scheduler runs as: serviceAccount.name, default "stevedore". */ -}}
{{- define "stevedore.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "stevedore" -}}
{{- end -}}

{{- /* logLevel as klog verbosity: error 0, info 2 (every decision and the reconcile errors that are retried),
debug 4; a number is taken as it is. */ -}}
{{- define "stevedore.verbosity" -}}
{{- $level := .Values.logLevel | toString -}}
{{- $levels := dict "error" "0" "info" "2" "debug" "4" -}}
{{- if hasKey $levels $level -}}
{{- get $levels $level -}}
{{- else if regexMatch "^([0-9]|10)$" $level -}}
{{- $level -}}
{{- else -}}
{{- fail (printf "logLevel must be error, info, debug or a verbosity 0-10, not %q" $level) -}}
{{- end -}}
{{- end -}}

{{- /* affinity, with the replicas' own labels filled in where a pod (anti-)affinity term selects no pods (as
Karpenter's chart does): the default keeps replicas on different nodes and off Stevedore's own nodes. */ -}}
{{- define "stevedore.affinity" -}}
{{- with .Values.affinity -}}
{{- $affinity := deepCopy . -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with (get $affinity $kind) -}}
{{- range $term := (get . "requiredDuringSchedulingIgnoredDuringExecution" | default list) -}}
{{- if not (hasKey $term "labelSelector") -}}
{{- $_ := set $term "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "stevedore")) -}}
{{- end -}}
{{- end -}}
{{- range $weighted := (get . "preferredDuringSchedulingIgnoredDuringExecution" | default list) -}}
{{- if not (hasKey $weighted.podAffinityTerm "labelSelector") -}}
{{- $_ := set $weighted.podAffinityTerm "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "stevedore")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}
{{- end -}}

{{- /* topologySpreadConstraints, with the replicas' own labels where a constraint selects no pods. */ -}}
{{- define "stevedore.topologySpreadConstraints" -}}
{{- with .Values.topologySpreadConstraints -}}
{{- $constraints := list -}}
{{- range . -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "stevedore")) -}}
{{- end -}}
{{- $constraints = append $constraints $c -}}
{{- end -}}
{{- toYaml $constraints -}}
{{- end -}}
{{- end -}}

{{- /* Karpenter settings that have no Stevedore equivalent stop the install, saying what to do instead (the values
schema refuses every other unknown key). */ -}}
{{- define "stevedore.refuseKarpenterSettings" -}}
{{- $instead := dict
  "isolatedVPC" "give the VPC interface endpoints for EC2, SSM, SQS, STS and EKS; IAM has no VPC endpoint, so name an existing instanceProfile on each EC2NodeClass instead of a role; the Price List API has none either: the region's embedded prices serve without it"
  "assumeRoleARN" "give the ServiceAccount the role (serviceAccount.roleArn for IRSA, or EKS Pod Identity), or set AWS_ROLE_ARN in env"
  "assumeRoleDuration" "the AWS SDK refreshes the ServiceAccount's credentials itself"
  "clusterCABundle" "Stevedore reads the cluster's certificate authority from eks:DescribeCluster"
  "eksControlPlane" "Stevedore always runs against an EKS control plane"
  "reservedENIs" "set kubelet.maxPods on the EC2NodeClass for custom networking"
  "featureGates" "Stevedore has no feature gates: use settings.spotToSpotConsolidation and settings.nodeRepair.enabled; NodeOverlay, reserved capacity and static capacity are always on"
  "preferencePolicy" "preferred affinity and ScheduleAnyway spread are honoured as the scheduler honours them (docs/scheduling.md)"
  "ignoreDRARequests" "DRA claims are placed by the scheduler's own DynamicResources plugin"
-}}
{{- range $key := keys .Values.settings | sortAlpha -}}
{{- if hasKey $instead $key -}}
{{- fail (printf "settings.%s is a Karpenter setting with no Stevedore equivalent: %s (docs/migration-from-karpenter.md)" $key (get $instead $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
