output "controller_role_arn" {
  description = "Role the scheduler's ServiceAccount assumes."
  value       = aws_iam_role.controller.arn
}

output "node_role_name" {
  description = "spec.role of the EC2NodeClasses."
  value       = aws_iam_role.node.name
}

output "interruption_queue_url" {
  description = "interruptionQueue plugin argument (STEVEDORE_INTERRUPTION_QUEUE_URL)."
  value       = aws_sqs_queue.interruption.url
}
