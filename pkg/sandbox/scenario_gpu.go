/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// The GPU NodePool of manifests/examples/gpu.yaml, and the Deployment of GPU pods that goes with it.
const (
	gpuNodePool   = "gpu"
	gpuDeployment = "gpu-inference"
)

// gpuScenario runs a GPU NodePool beside the production ones (manifests/examples/gpu.yaml): two GPU pods and
// three inflate pods are scaled up together; the GPU pods must land on NVIDIA types of the gpu pool, launched from
// the NVIDIA image, and the inflate pods on the production pools' plain types. A table shows every node; then both
// Deployments go to 0 and every node must go.
func gpuScenario(ctx context.Context, sb *Sandbox, out io.Writer) error {
	p := newProgress(out)
	if err := applyExamples(ctx, sb, "ec2nodeclasses.yaml", "production.yaml", "inflate.yaml", "gpu.yaml"); err != nil {
		return err
	}
	for _, name := range []string{"arm64-spot", "amd64-spot", "on-demand-critical", gpuNodePool} {
		if err := quickDisruption(ctx, sb, name); err != nil {
			return err
		}
	}
	p.step("applied manifests/examples: the production NodePools and the gpu NodePool (NVIDIA types, tainted nvidia.com/gpu, at most 8 GPUs)")
	for name, n := range map[string]int32{gpuDeployment: 2, inflateDeployment: 3} {
		if err := scale(ctx, sb, name, n); err != nil {
			return err
		}
	}
	p.step("kubectl scale deployment gpu-inference --replicas 2; kubectl scale deployment inflate --replicas 3")
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		running, err := runningPods(ctx, sb, "app in (gpu-inference, inflate)")
		return err == nil && len(running) == 5, err
	}); err != nil {
		return fmt.Errorf("the 5 pods did not all run within 3 minutes: %w", err)
	}
	p.step("5 pods Running after %.1fs", time.Since(start).Seconds())
	if err := checkGPUPlacement(ctx, sb, out); err != nil {
		return err
	}
	for _, name := range []string{gpuDeployment, inflateDeployment} {
		if err := scale(ctx, sb, name, 0); err != nil {
			return err
		}
	}
	p.step("kubectl scale deployment gpu-inference inflate --replicas 0")
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, err
	}); err != nil {
		return fmt.Errorf("nodes were left after scaling to 0: %w", err)
	}
	p.step("every node removed")
	return nil
}

// runningPods lists the default namespace's Running pods matching a label selector.
func runningPods(ctx context.Context, sb *Sandbox, selector string) ([]corev1.Pod, error) {
	list, err := sb.Kube.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// checkGPUPlacement prints each pod's node (pool, type, GPUs, image) and checks GPU pods are on NVIDIA nodes of the
// gpu pool launched from an NVIDIA image, and the others on nodes without a GPU.
func checkGPUPlacement(ctx context.Context, sb *Sandbox, out io.Writer) error {
	pods, err := runningPods(ctx, sb, "app in (gpu-inference, inflate)")
	if err != nil {
		return err
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "pod\tnodepool\ttype\tgpus\timage")
	var problems []string
	for _, p := range pods {
		node, err := sb.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		image := ""
		if inst := sb.AWS.EC2.InstanceByNodeName(node.Name); inst != nil {
			image = sb.AWS.EC2.ImageName(inst.ImageID)
		}
		gpus := node.Labels[stevedorev1.LabelInstanceGPUCount]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, node.Labels[stevedorev1.LabelNodePool], node.Labels[corev1.LabelInstanceTypeStable],
			firstNonEmptyString(gpus, "-"), image)
		wantGPU := p.Labels["app"] == gpuDeployment
		switch {
		case wantGPU && (node.Labels[stevedorev1.LabelNodePool] != gpuNodePool || node.Labels[stevedorev1.LabelInstanceGPUManufacturer] != "nvidia" || !strings.Contains(image, "nvidia")):
			problems = append(problems, fmt.Sprintf("GPU pod %s is on %s of NodePool %s from image %s", p.Name, node.Labels[corev1.LabelInstanceTypeStable],
				node.Labels[stevedorev1.LabelNodePool], image))
		case !wantGPU && gpus != "":
			problems = append(problems, fmt.Sprintf("pod %s asks for no GPU but runs on %s", p.Name, node.Labels[corev1.LabelInstanceTypeStable]))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
