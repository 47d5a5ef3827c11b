/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// requesting adds extended-resource requests (and the equal limits the API server requires) to a pod's container.
func requesting(name string, n int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		q := *resource.NewQuantity(n, resource.DecimalSI)
		c.Resources.Requests[corev1.ResourceName(name)] = q
		c.Resources.Limits[corev1.ResourceName(name)] = q
	}
}

// cheapestWith is the catalog's cheapest type (by its cheapest offering) whose allocatable, under AWS's default
// overhead model, holds the requests.
func cheapestWith(t *testing.T, requests corev1.ResourceList) string {
	t.Helper()
	best, price := "", math.Inf(1)
	for _, ct := range catalog.Default().InstanceTypes {
		it, err := cloud.NewInstanceType(ct, cloud.DefaultOverheadModel(), nil)
		if err != nil {
			t.Fatal(err)
		}
		fits := true
		for name, q := range requests {
			a, ok := it.Allocatable()[name]
			fits = fits && ok && q.Cmp(a) <= 0
		}
		if o, ok := it.Offerings.Cheapest(); fits && ok && o.Price < price {
			best, price = it.Name, o.Price
		}
	}
	return best
}

// TestAcceleratedPodsGetTheirTypesImagesAndLabels runs a GPU pod, a NeuronCore pod, an EFA pod and plain pods
// through NodePools that allow every type: the GPU pod gets the cheapest type with an NVIDIA GPU, launched
// from the NVIDIA variant of the AMI, with Karpenter's GPU labels and the GPU in the node's and NodeClaim's
// capacity; the Neuron pod a Neuron type and the Neuron image; the EFA pod a type with EFA; plain pods no
// accelerated type.
func TestAcceleratedPodsGetTheirTypesImagesAndLabels(t *testing.T) {
	ns := harness.Namespace(t, sb)
	// the accelerated pods each have a NodePool of their own (a GPU and an EFA pod together are cheapest on one
	// type with both); the plain pods share the GPU pod's
	harness.NodePool(t, sb, "accel", "accel")
	harness.NodePool(t, sb, "accel-neuron", "accel-neuron")
	harness.NodePool(t, sb, "accel-efa", "accel-efa")
	gpu, gpuNames := harness.Pods(ns, "accel", "gpu", 1, "1", "4Gi", requesting(stevedorev1.ResourceNVIDIAGPU, 1))
	neuron, neuronNames := harness.Pods(ns, "accel-neuron", "neuron", 1, "1", "2Gi", requesting(stevedorev1.ResourceAWSNeuronCore, 2))
	efa, efaNames := harness.Pods(ns, "accel-efa", "efa", 1, "2", "8Gi", requesting(stevedorev1.ResourceEFA, 1))
	plain, plainNames := harness.Pods(ns, "accel", "web", 2, "500m", "1Gi")
	harness.CreatePods(t, sb, append(append(append(gpu, neuron...), efa...), plain...)...)
	bound := harness.WaitBound(t, sb, ns, append(append(append(gpuNames, neuronNames...), efaNames...), plainNames...))

	param := func(path string) string {
		v, ok := sb.AWS.SSM.Get(path)
		if !ok {
			t.Fatalf("the emulator publishes no %s", path)
		}
		return v
	}
	al2023 := "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/" // the sandbox's API server is 1.37
	nodeOf := func(pod string) (*corev1.Node, string) {
		node := harness.Node(t, sb, bound[pod].Spec.NodeName)
		inst := sb.AWS.EC2.InstanceByNodeName(node.Name)
		if inst == nil {
			t.Fatalf("no instance for node %s", node.Name)
		}
		return node, inst.ImageID
	}

	node, image := nodeOf(gpuNames[0])
	want := cheapestWith(t, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi"),
		stevedorev1.ResourceNVIDIAGPU: resource.MustParse("1")})
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != want {
		t.Errorf("the GPU pod runs on %s, want the cheapest type with an NVIDIA GPU, %s", got, want)
	}
	nvidiaImage := param(al2023 + "nvidia/recommended/image_id")
	if node.Labels[corev1.LabelArchStable] == "arm64" {
		nvidiaImage = param(strings.Replace(al2023, "x86_64", "arm64", 1) + "nvidia/recommended/image_id")
	}
	if image != nvidiaImage {
		t.Errorf("the GPU node was launched from %s, want the AL2023 NVIDIA image", image)
	}
	for _, key := range []string{stevedorev1.LabelInstanceGPUName, stevedorev1.LabelInstanceGPUManufacturer, stevedorev1.LabelInstanceGPUCount, stevedorev1.LabelInstanceGPUMemory} {
		if node.Labels[key] == "" {
			t.Errorf("GPU node %s lacks label %s", node.Name, key)
		}
	}
	if q := node.Status.Allocatable[stevedorev1.ResourceNVIDIAGPU]; q.Value() < 1 {
		t.Errorf("GPU node %s allocatable has %s GPUs", node.Name, q.String())
	}
	claim := claimOfNode(t, node.Name)
	if q := claim.Status.Capacity[stevedorev1.ResourceNVIDIAGPU]; q.Value() < 1 {
		t.Errorf("NodeClaim %s capacity %v lacks the GPU", claim.Name, claim.Status.Capacity)
	}
	if gpus := printedColumn(t, claim.Name, "GPUs"); gpus != node.Labels[stevedorev1.LabelInstanceGPUCount] {
		t.Errorf("kubectl get nodeclaims -o wide shows GPUs %q for %s, want %s", gpus, claim.Name, node.Labels[stevedorev1.LabelInstanceGPUCount])
	}

	node, image = nodeOf(neuronNames[0])
	if node.Labels[stevedorev1.LabelInstanceAcceleratorManufacturer] != "aws" || image != param(al2023+"neuron/recommended/image_id") {
		t.Errorf("the Neuron pod runs on %s (accelerator maker %q) from %s, want a Neuron type from the AL2023 Neuron image",
			node.Labels[corev1.LabelInstanceTypeStable], node.Labels[stevedorev1.LabelInstanceAcceleratorManufacturer], image)
	}
	node, _ = nodeOf(efaNames[0])
	if q := node.Status.Allocatable[stevedorev1.ResourceEFA]; q.Value() < 1 {
		t.Errorf("the EFA pod runs on %s, whose allocatable has no EFA", node.Labels[corev1.LabelInstanceTypeStable])
	}
	for _, name := range plainNames {
		node, image = nodeOf(name)
		if node.Labels[stevedorev1.LabelInstanceGPUCount] != "" || node.Labels[stevedorev1.LabelInstanceAcceleratorCount] != "" {
			t.Errorf("plain pod %s runs on accelerated type %s", name, node.Labels[corev1.LabelInstanceTypeStable])
		}
		if image == nvidiaImage || image == param(al2023+"neuron/recommended/image_id") {
			t.Errorf("plain pod %s's node was launched from the accelerated image %s", name, image)
		}
	}
}

// TestANodePoolGPULimitHolds: a NodePool limited to one NVIDIA GPU launches one single-GPU node for two pods
// that want one each; the second pod stays Pending.
func TestANodePoolGPULimitHolds(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "gpu-capped", "gpucap", harness.WithRequirements(harness.Req(stevedorev1.LabelInstanceGPUManufacturer, "In", "nvidia")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Limits = stevedorev1.Limits{stevedorev1.ResourceNVIDIAGPU: resource.MustParse("1")}
		})
	ps, names := harness.Pods(ns, "gpucap", "train", 2, "1", "2Gi", requesting(stevedorev1.ResourceNVIDIAGPU, 1))
	harness.CreatePods(t, sb, ps...)
	var boundName, pendingName string
	harness.Eventually(t, "one pod bound and the other marked unschedulable", func(ctx context.Context) (bool, error) {
		boundName, pendingName = "", ""
		for _, name := range names {
			p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				boundName = name
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					pendingName = name
				}
			}
		}
		return boundName != "" && pendingName != "", nil
	})
	claims := harness.NodeClaimsOf(t, sb, "gpu-capped")
	gpus := int64(0)
	for _, c := range claims {
		q := c.Status.Capacity[stevedorev1.ResourceNVIDIAGPU]
		gpus += q.Value()
	}
	if len(claims) != 1 || gpus != 1 {
		t.Fatalf("%d NodeClaims with %d GPUs in the NodePool limited to 1 GPU; want 1 and 1", len(claims), gpus)
	}
}

func claimOfNode(t *testing.T, node string) *stevedorev1.NodeClaim {
	t.Helper()
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		if claims.Items[i].Status.NodeName == node {
			return &claims.Items[i]
		}
	}
	t.Fatalf("no NodeClaim has node %s", node)
	return nil
}

// printedColumn is a NodeClaim's cell in a column of the table the API server prints for kubectl get.
func printedColumn(t *testing.T, name, column string) string {
	t.Helper()
	raw, err := sb.Stevedore.StevedoreV1().RESTClient().Get().Resource("nodeclaims").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	for i, c := range table.ColumnDefinitions {
		if c.Name == column && len(table.Rows) == 1 && i < len(table.Rows[0].Cells) {
			return fmt.Sprint(table.Rows[0].Cells[i])
		}
	}
	t.Fatalf("the NodeClaim table has no column %s: %+v", column, table.ColumnDefinitions)
	return ""
}

// TestAPodRequestingEFAGetsANodeWithTheEFAInterfacesAttached: a pod requesting eight NVIDIA GPUs and four EFA
// interfaces gets the cheapest type with both, launched with every EFA interface the type takes (the sandbox's
// kubelet, as the EFA device plugin, advertises the interfaces attached, not those the type could take), and binds.
// DescribeInstances, through the AWS CLI where it is installed, shows the interfaces.
func TestAPodRequestingEFAGetsANodeWithTheEFAInterfacesAttached(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "efa-training", "efa-training")
	pods, names := harness.Pods(ns, "efa-training", "trainer", 1, "4", "16Gi", requesting(stevedorev1.ResourceNVIDIAGPU, 8),
		requesting(stevedorev1.ResourceEFA, 4))
	harness.CreatePods(t, sb, pods...)
	bound := harness.WaitBound(t, sb, ns, names)
	node := harness.Node(t, sb, bound[names[0]].Spec.NodeName)
	want := cheapestWith(t, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		stevedorev1.ResourceNVIDIAGPU: resource.MustParse("8"), stevedorev1.ResourceEFA: resource.MustParse("4")})
	typ := node.Labels[corev1.LabelInstanceTypeStable]
	if typ != want {
		t.Errorf("the pod runs on %s, want the cheapest type with eight GPUs and four EFA interfaces, %s", typ, want)
	}
	var maxEFA int
	for _, it := range catalog.Default().InstanceTypes {
		if it.Name == typ {
			maxEFA = it.EFA
		}
	}
	if q := node.Status.Allocatable[stevedorev1.ResourceEFA]; q.Value() != int64(maxEFA) {
		t.Errorf("node %s (%s) advertises %s EFA interfaces, want the type's %d", node.Name, typ, q.String(), maxEFA)
	}
	inst := sb.AWS.EC2.InstanceByNodeName(node.Name)
	if inst == nil {
		t.Fatalf("no instance for node %s", node.Name)
	}
	types := interfaceTypes(t, inst.ID)
	efa := 0
	for _, it := range types {
		if it == "efa" {
			efa++
		}
	}
	if efa != maxEFA {
		t.Errorf("instance %s has interfaces %v, want %d of type efa", inst.ID, types, maxEFA)
	}
	t.Logf("the pod runs on a %s launched with interfaces %v", typ, types)
}

// interfaceTypes reads an instance's network interface types with `aws ec2 describe-instances` against the
// sandbox's EC2, or from the emulator where the AWS CLI is not installed (unless STEVEDORE_REQUIRE_AWSCLI says it
// must be).
func interfaceTypes(t *testing.T, id string) []string {
	t.Helper()
	cli, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_AWSCLI") != "" {
			t.Fatal("the AWS CLI is not installed, and STEVEDORE_REQUIRE_AWSCLI says it must be")
		}
		var out []string
		for _, ni := range sb.AWS.EC2.Instance(id).LaunchTemplate.NetworkInterfaces {
			out = append(out, ni.InterfaceType)
		}
		return out
	}
	env := sb.Env()
	cmd := exec.Command(cli, "ec2", "describe-instances", "--instance-ids", id, "--output", "json", //nolint:gosec // G204: the test's own arguments
		"--endpoint-url", env["AWS_ENDPOINT_URL_EC2"], "--region", env["AWS_REGION"],
		"--query", "Reservations[0].Instances[0].NetworkInterfaces[].InterfaceType")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=SECRET", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws ec2 describe-instances %s: %v\n%s", id, err, stderr.String())
	}
	var types []string
	if err := json.Unmarshal(out, &types); err != nil {
		t.Fatalf("aws ec2 describe-instances printed %q: %v", out, err)
	}
	return types
}
