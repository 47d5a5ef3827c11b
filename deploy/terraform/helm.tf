# Stevedore's CRDs (charts/stevedore-crd), a release of their own so that they upgrade with Stevedore. Configure the
# helm provider for the cluster in the root module.
resource "helm_release" "stevedore_crd" {
  name             = "stevedore-crd"
  chart            = "${path.module}/../../charts/stevedore-crd"
  namespace        = var.namespace
  create_namespace = true
}

# The Stevedore release (charts/stevedore), its CRDs from the release above.
resource "helm_release" "stevedore" {
  name             = "stevedore"
  chart            = "${path.module}/../../charts/stevedore"
  namespace        = var.namespace
  create_namespace = true
  skip_crds        = true

  values = [yamlencode({
    settings = {
      clusterName       = var.cluster_name
      clusterEndpoint   = data.aws_eks_cluster.this.endpoint
      region            = var.region
      interruptionQueue = aws_sqs_queue.interruption.url
    }
    image          = var.image
    serviceAccount = { roleArn = var.use_pod_identity ? "" : aws_iam_role.controller.arn }
  })]

  depends_on = [helm_release.stevedore_crd, aws_iam_role_policy.controller, aws_eks_access_entry.node]
}
