/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/devices"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// nvidiaGPUClass creates the DeviceClass NVIDIA's DRA driver installs for whole GPUs (shared by the tests: created
// once, left in place).
func nvidiaGPUClass(t *testing.T) {
	t.Helper()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}}}}
	if _, err := sb.Kube.ResourceV1().DeviceClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// gpuClaimTemplate creates a ResourceClaimTemplate asking for count NVIDIA GPUs, each passing selector.
func gpuClaimTemplate(t *testing.T, ns, name string, count int64, selector string) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}}}}}}}}
	if _, err := sb.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claimingFromTemplate has a pod's container use a claim made from the template.
func claimingFromTemplate(template string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	}
}

// cheapestWithGPUs is the cheapest catalog type with at least count NVIDIA GPUs of at least memoryMiB each,
// worked out from the catalog alone.
func cheapestWithGPUs(count int, memoryMiB int64) string {
	best, price := "", math.Inf(1)
	for _, it := range catalog.Default().InstanceTypes {
		g := it.GPUs
		if g == nil || g.Manufacturer != "NVIDIA" || g.Count < count || g.MemoryMiB < memoryMiB {
			continue
		}
		for _, o := range it.Offerings {
			if o.Price < price {
				best, price = it.Name, o.Price
			}
		}
	}
	return best
}

// TestAPodClaimingTwoLargeGPUsGetsTheCheapestTypeThatHasThem: a pod whose ResourceClaimTemplate asks for two NVIDIA
// GPUs of at least 40 GiB gets a node of the cheapest type with two such GPUs, and binds with its claim allocated
// there by kube-scheduler's DynamicResources plugin from the devices the node's driver published.
func TestAPodClaimingTwoLargeGPUsGetsTheCheapestTypeThatHasThem(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "dra", "dra")
	nvidiaGPUClass(t)
	gpuClaimTemplate(t, ns, "two-big-gpus", 2, `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`)
	pods, names := harness.Pods(ns, "dra", "trainer", 1, "4", "16Gi", claimingFromTemplate("two-big-gpus"))
	harness.CreatePods(t, sb, pods...)
	bound := harness.WaitBound(t, sb, ns, names)
	pod := bound[names[0]]
	node := harness.Node(t, sb, pod.Spec.NodeName)
	want := cheapestWithGPUs(2, 40*1024)
	if typ := node.Labels[corev1.LabelInstanceTypeStable]; typ != want {
		t.Errorf("the pod runs on %s, want the cheapest type with two NVIDIA GPUs of at least 40 GiB, %s", typ, want)
	}
	var claimName string
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == "gpus" && st.ResourceClaimName != nil {
			claimName = *st.ResourceClaimName
		}
	}
	if claimName == "" {
		t.Fatalf("pod %s has no claim made from its template: %+v", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim, err := sb.Kube.ResourceV1().ResourceClaims(ns).Get(context.Background(), claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s is not allocated", claimName)
	}
	var got []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		got = append(got, r.Driver+"/"+r.Pool+"/"+r.Device)
		if r.Driver != devices.DriverNVIDIA || r.Pool != node.Name {
			t.Errorf("claim %s was given %s/%s/%s, want a GPU of node %s", claimName, r.Driver, r.Pool, r.Device, node.Name)
		}
	}
	if len(got) != 2 {
		t.Errorf("claim %s was given %v, want two GPUs", claimName, got)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != pod.UID {
		t.Errorf("claim %s is reserved for %+v, want pod %s", claimName, claim.Status.ReservedFor, pod.Name)
	}
	t.Logf("the pod runs on a %s with claim %s given %v", node.Labels[corev1.LabelInstanceTypeStable], claimName, got)

	// three more such pods: planned by the GPUs their claims take, two share a four-GPU node, and no node is
	// given more pods than it has GPUs for
	more, moreNames := harness.Pods(ns, "dra", "worker", 3, "4", "16Gi", claimingFromTemplate("two-big-gpus"))
	harness.CreatePods(t, sb, more...)
	perNode := map[string]int{}
	for name, p := range harness.WaitBound(t, sb, ns, moreNames) {
		if name != pod.Name {
			perNode[p.Spec.NodeName]++
		}
	}
	perNode[node.Name]++ // the first pod
	shared := false
	for name, pods := range perNode {
		n := harness.Node(t, sb, name)
		gpus, _ := strconv.Atoi(n.Labels[stevedorev1.LabelInstanceGPUCount])
		if 2*pods > gpus {
			t.Errorf("node %s (%s, %d GPUs) runs %d pods claiming two GPUs each", name, n.Labels[corev1.LabelInstanceTypeStable], gpus, pods)
		}
		shared = shared || pods > 1
	}
	if !shared {
		t.Errorf("the pods are spread one per node (%v): two pods claiming two GPUs each fit a four-GPU node", perNode)
	}
	t.Logf("with three more, the pods per node: %v", perNode)
}

// TestAClaimNoTypeCanSatisfyIsRefusedNamingIt: a claim for more GPUs than any type has launches nothing, and the pod
// gets a FailedProvision event naming the claim and its request.
func TestAClaimNoTypeCanSatisfyIsRefusedNamingIt(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "dra-refused", "dra-refused")
	nvidiaGPUClass(t)
	gpuClaimTemplate(t, ns, "sixteen-gpus", 16, `device.attributes["gpu.nvidia.com"].type == "gpu"`)
	pods, names := harness.Pods(ns, "dra-refused", "trainer", 1, "1", "1Gi", claimingFromTemplate("sixteen-gpus"))
	harness.CreatePods(t, sb, pods...)
	note := harness.WaitEvent(t, sb, names[0], provision.ReasonFailedProvision)
	if !strings.Contains(note, "ResourceClaim "+ns+"/"+names[0]+"-gpus-") || !strings.Contains(note, "(requests gpus)") {
		t.Errorf("the event does not name the pod's claim and its request: %s", note)
	}
	t.Logf("the event: %s", note)
	if claims := harness.NodeClaimsOf(t, sb, "dra-refused"); len(claims) != 0 {
		t.Errorf("%d NodeClaims launched for a claim no type can satisfy", len(claims))
	}
}

// TestAnExtendedResourceServedByDRAGetsANodeWhoseDevicesServeIt: with a DeviceClass serving nvidia.com/gpu through
// DRA (Kubernetes 1.37's DRA extended resources), a pod asking for nvidia.com/gpu: 2 gets the cheapest type with two
// GPUs, whose node advertises no nvidia.com/gpu (NVIDIA's DRA driver runs there, not its device plugin), and
// kube-scheduler allocates the two GPUs from the node's devices to a claim it makes for the pod.
func TestAnExtendedResourceServedByDRAGetsANodeWhoseDevicesServeIt(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "dra-extended", "dra-extended")
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-extended.nvidia.com"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(stevedorev1.ResourceNVIDIAGPU)),
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}}}}
	if _, err := sb.Kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Kube.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}) })
	pods, names := harness.Pods(ns, "dra-extended", "trainer", 1, "1", "4Gi", requesting(stevedorev1.ResourceNVIDIAGPU, 2))
	harness.CreatePods(t, sb, pods...)
	pod := harness.WaitBound(t, sb, ns, names)[names[0]]
	node := harness.Node(t, sb, pod.Spec.NodeName)
	if want := cheapestWithGPUs(2, 0); node.Labels[corev1.LabelInstanceTypeStable] != want {
		t.Errorf("the pod runs on %s, want the cheapest type with two NVIDIA GPUs, %s", node.Labels[corev1.LabelInstanceTypeStable], want)
	}
	if q, ok := node.Status.Allocatable[stevedorev1.ResourceNVIDIAGPU]; ok {
		t.Errorf("node %s advertises %s nvidia.com/gpu: the DRA driver serves them there", node.Name, q.String())
	}
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil || st.ResourceClaimName == "" {
		t.Fatalf("pod %s has no claim for its extended resource: %+v", pod.Name, pod.Status)
	}
	claim, err := sb.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == devices.DriverNVIDIA && r.Pool == node.Name {
				got = append(got, r.Device)
			}
		}
	}
	if len(got) != 2 {
		t.Errorf("the pod's extended resource claim %s was given %v on node %s, want two GPUs", claim.Name, got, node.Name)
	}
	t.Logf("the pod runs on a %s; claim %s was given %v", node.Labels[corev1.LabelInstanceTypeStable], claim.Name, got)
}

// TestAPodClaimingGPUsAndEFADevicesGetsANodeLaunchedWithItsEFAInterfaces: a pod whose claim asks for eight NVIDIA
// GPUs and four EFA devices (DRANET's, as EKS installs it) gets the cheapest type with both, launched with its EFA
// interfaces, and kube-scheduler allocates the claim from the GPUs and EFA devices the node's drivers published.
func TestAPodClaimingGPUsAndEFADevicesGetsANodeLaunchedWithItsEFAInterfaces(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "dra-efa", "dra-efa")
	nvidiaGPUClass(t)
	efaClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "efa.networking.k8s.aws"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "dra.net" && device.attributes["dra.net"].pciDevice == "Elastic Fabric Adapter (EFA)"`}}}}}
	if _, err := sb.Kube.ResourceV1().DeviceClasses().Create(ctx, efaClass, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpus-and-efa", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{
				{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8}},
				{Name: "efa", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: efaClass.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4}},
			}}}}}
	if _, err := sb.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, names := harness.Pods(ns, "dra-efa", "trainer", 1, "4", "16Gi", claimingFromTemplate(tmpl.Name))
	harness.CreatePods(t, sb, pods...)
	pod := harness.WaitBound(t, sb, ns, names)[names[0]]
	node := harness.Node(t, sb, pod.Spec.NodeName)
	typ := node.Labels[corev1.LabelInstanceTypeStable]
	inst := sb.AWS.EC2.InstanceByNodeName(node.Name)
	if inst == nil {
		t.Fatalf("no instance for node %s", node.Name)
	}
	efa := efaInterfacesOf(inst)
	var maxEFA int
	for _, it := range catalog.Default().InstanceTypes {
		if it.Name == typ {
			maxEFA = it.EFA
			if it.GPUs == nil || it.GPUs.Count < 8 || it.EFA < 4 {
				t.Errorf("the pod runs on %s, which has not eight GPUs and four EFA interfaces", typ)
			}
		}
	}
	if efa != maxEFA {
		t.Errorf("instance %s (%s) was launched with %d EFA interfaces, want the type's %d", inst.ID, typ, efa, maxEFA)
	}
	claim, err := sb.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byDriver := map[string]int{}
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Pool == node.Name {
				byDriver[r.Driver]++
			}
		}
	}
	if byDriver[devices.DriverNVIDIA] != 8 || byDriver[devices.DriverEFA] != 4 {
		t.Errorf("claim %s was given %v devices on %s, want 8 of %s and 4 of %s", claim.Name, byDriver, node.Name, devices.DriverNVIDIA, devices.DriverEFA)
	}
	t.Logf("the pod runs on a %s launched with %d EFA interfaces; its claim was given %v", typ, efa, byDriver)
}
