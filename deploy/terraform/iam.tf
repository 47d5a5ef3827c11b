# The node role (EC2NodeClass spec.role); Stevedore creates its instance profile.
resource "aws_iam_role" "node" {
  name = local.node_role
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each = toset([
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
  ])
  role       = aws_iam_role.node.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/${each.value}"
}

# Nodes of the role join the cluster.
resource "aws_eks_access_entry" "node" {
  cluster_name  = var.cluster_name
  principal_arn = aws_iam_role.node.arn
  type          = "EC2_LINUX"
}

# The scheduler's role: assumed through EKS Pod Identity or IRSA by the ServiceAccount stevedore/stevedore.
resource "aws_iam_role" "controller" {
  name = "StevedoreControllerRole-${var.cluster_name}"
  assume_role_policy = var.use_pod_identity ? jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
    }) : jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Federated = var.oidc_provider_arn }
      Action    = "sts:AssumeRoleWithWebIdentity"
      Condition = {
        StringEquals = {
          "${replace(data.aws_eks_cluster.this.identity[0].oidc[0].issuer, "https://", "")}:sub" = "system:serviceaccount:${var.namespace}:stevedore"
          "${replace(data.aws_eks_cluster.this.identity[0].oidc[0].issuer, "https://", "")}:aud" = "sts.amazonaws.com"
        }
      }
    }]
  })
}

# The least-privilege policy of deploy/iam, with this cluster's names filled in.
resource "aws_iam_role_policy" "controller" {
  name = "StevedoreControllerPolicy"
  role = aws_iam_role.controller.id
  policy = templatefile("${path.module}/../iam/stevedore-controller-policy.json", {
    AWS_PARTITION  = local.partition
    AWS_REGION     = var.region
    AWS_ACCOUNT_ID = local.account_id
    CLUSTER_NAME   = var.cluster_name
    QUEUE_NAME     = local.queue_name
    NODE_ROLE_NAME = local.node_role
  })
}

# Other node roles the EC2NodeClasses name (Karpenter's, carried over by `scheduler convert`): passed to EC2 like
# Stevedore's own.
resource "aws_iam_role_policy" "pass_additional_node_roles" {
  count = length(var.additional_node_roles) > 0 ? 1 : 0
  name  = "StevedorePassAdditionalNodeRoles"
  role  = aws_iam_role.controller.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "PassAdditionalNodeRoles"
      Effect    = "Allow"
      Action    = ["iam:PassRole"]
      Resource  = [for r in var.additional_node_roles : "arn:${local.partition}:iam::${local.account_id}:role/${r}"]
      Condition = { StringEquals = { "iam:PassedToService" = "ec2.amazonaws.com" } }
    }]
  })
}

resource "aws_eks_pod_identity_association" "controller" {
  count           = var.use_pod_identity ? 1 : 0
  cluster_name    = var.cluster_name
  namespace       = var.namespace
  service_account = "stevedore"
  role_arn        = aws_iam_role.controller.arn
}
