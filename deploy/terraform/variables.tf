variable "cluster_name" {
  description = "Name of the EKS cluster Stevedore launches nodes for."
  type        = string
}

variable "region" {
  description = "AWS region of the cluster."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets nodes may launch in; tagged karpenter.sh/discovery=<cluster_name> for the EC2NodeClasses to select."
  type        = list(string)
}

variable "node_security_group_ids" {
  description = "Security groups of the nodes; tagged like the subnets."
  type        = list(string)
}

variable "manage_discovery_tags" {
  description = "Tag subnet_ids and node_security_group_ids with karpenter.sh/discovery=<cluster_name>. Set false where another tool (an existing Karpenter installation) already owns those tags."
  type        = bool
  default     = true
}

variable "use_pod_identity" {
  description = "true: EKS Pod Identity for the scheduler's ServiceAccount; false: IRSA (needs oidc_provider_arn)."
  type        = bool
  default     = true
}

variable "oidc_provider_arn" {
  description = "ARN of the cluster's IAM OIDC provider (IRSA only)."
  type        = string
  default     = ""
}

variable "additional_node_roles" {
  description = "Names of node roles besides Stevedore's own that EC2NodeClasses name in spec.role (Karpenter's KarpenterNodeRole-<cluster> while migrating): the scheduler may pass them to EC2. Their nodes need an EKS access entry, which Karpenter's installation already made."
  type        = list(string)
  default     = []
}

variable "namespace" {
  description = "Namespace of the Stevedore release."
  type        = string
  default     = "stevedore"
}

variable "image" {
  description = "Stevedore scheduler image (make image)."
  type        = string
  default     = "public.ecr.aws/stevedore/scheduler:v0.2.0"
}
