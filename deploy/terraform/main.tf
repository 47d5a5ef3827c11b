data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}

data "aws_eks_cluster" "this" {
  name = var.cluster_name
}

locals {
  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id
  queue_name = "${var.cluster_name}-stevedore-interruptions"
  node_role  = "StevedoreNodeRole-${var.cluster_name}"
}

# Discovery: the example EC2NodeClasses select subnets and security groups by this tag.
resource "aws_ec2_tag" "subnet_discovery" {
  for_each    = var.manage_discovery_tags ? toset(var.subnet_ids) : toset([])
  resource_id = each.value
  key         = "karpenter.sh/discovery"
  value       = var.cluster_name
}

resource "aws_ec2_tag" "security_group_discovery" {
  for_each    = var.manage_discovery_tags ? toset(var.node_security_group_ids) : toset([])
  resource_id = each.value
  key         = "karpenter.sh/discovery"
  value       = var.cluster_name
}
