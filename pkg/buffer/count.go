/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package buffer

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// MaxChunks is the most chunks a buffer keeps, whatever its percentage or limits allow: the bound spec.replicas has.
// Each chunk is a pod in every solve, so a limit far above one chunk's requests must not become millions of pods.
const MaxChunks = 10000

// Request is how many chunks a buffer asks for, as either API writes it.
type Request struct {
	Replicas, Percentage *int32
	Limits               corev1.ResourceList
	// Larger combines replicas and percentage by the larger of the two (autoscaling.x-k8s.io); otherwise by the
	// smaller (stevedore.dev).
	Larger bool
}

// Count is how many chunks a buffer keeps: replicas, the percentage of the workload's replicas (rounded up, at
// least one when the workload has replicas), combined by the smaller or the larger when both are set (Request.Larger),
// and no more than fit in the limits given one chunk's requests (limits alone: as many as fit; limits on resources
// the chunk does not request are ignored); at most MaxChunks.
func Count(req Request, chunk corev1.ResourceList, workloadReplicas int32) int {
	n := -1 // unbounded so far
	if req.Replicas != nil {
		n = int(*req.Replicas)
	}
	if req.Percentage != nil {
		p := int(math.Ceil(float64(*req.Percentage) * float64(workloadReplicas) / 100))
		if workloadReplicas > 0 && *req.Percentage > 0 {
			p = max(p, 1)
		}
		switch {
		case n < 0:
			n = p
		case req.Larger:
			n = max(n, p)
		default:
			n = min(n, p)
		}
	}
	for name, limit := range req.Limits {
		q, ok := chunk[name]
		if !ok || q.IsZero() {
			continue
		}
		fit := math.Floor(limit.AsApproximateFloat64() / q.AsApproximateFloat64())
		if n < 0 || fit < float64(n) {
			n = int(min(fit, MaxChunks))
		}
	}
	return min(max(n, 0), MaxChunks)
}
