/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/devices"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// DeviceObjects are the listers of the cluster's DRA objects the planner reads for pods with ResourceClaims; nil
// listers where the cluster does not serve resource.k8s.io/v1.
type DeviceObjects struct {
	Claims  resourcelisters.ResourceClaimLister
	Classes resourcelisters.DeviceClassLister
}

// deviceTypes decides which instance types can serve the ResourceClaims of pods: kube-scheduler's DynamicResources
// plugin allocates each pod's claims on a node of each type, from the ResourceSlices its drivers would publish
// (package devices). The solver then sees such a pod as it sees one using a device plugin: it may only go on a type
// that satisfied its claims (a required node affinity on the instance type), and takes the devices its claims took as
// the extended resource their device plugin would advertise (nvidia.com/gpu, aws.amazon.com/neuron,
// vpc.amazonaws.com/efa), so that the pods a node is planned for never need more devices than it has, and a node
// whose pods claim EFA devices is launched with its EFA interfaces.
type deviceTypes struct {
	mu     sync.Mutex // the fitter serves one pod at a time
	fitter *simulation.DeviceFitter
}

// forSolver returns the pods as the solver sees them, and why each pod whose claims no instance type of the
// NodePools can satisfy gets no node. A pod without ResourceClaims is returned as it is; one whose claim is not
// created yet is left out when waitForClaims (kube-controller-manager creates it), refused otherwise.
func (d *deviceTypes) forSolver(ctx context.Context, objects DeviceObjects, pods []*corev1.Pod, pools []solver.NodePoolOption,
	waitForClaims bool) ([]*corev1.Pod, map[types.UID]string, error) {
	var out []*corev1.Pod
	refused := map[types.UID]string{}
	var types []*cloud.InstanceType
	fits := map[string]typeFit{} // pods whose claims ask for the same devices fit the same types (a gang's, a Job's)
	for i, pod := range pods {
		if len(pod.Spec.ResourceClaims) == 0 {
			if out != nil {
				out = append(out, pod)
			}
			continue
		}
		if out == nil {
			out = append(make([]*corev1.Pod, 0, len(pods)), pods[:i]...)
		}
		if types == nil {
			types = modelledTypes(pools)
		}
		translated, why, err := d.translate(ctx, objects, pod, types, fits)
		if err != nil {
			return nil, nil, err
		}
		if waitForClaims && errors.Is(why, errClaimNotCreated) {
			continue // kube-scheduler tries the pod again once kube-controller-manager has created its claim
		}
		if why != nil {
			refused[pod.UID] = why.Error()
			continue
		}
		out = append(out, translated)
	}
	if out == nil {
		return pods, refused, nil
	}
	return out, refused, nil
}

// modelledTypes are the instance types of the NodePools whose devices package devices models, each once, by name.
func modelledTypes(pools []solver.NodePoolOption) []*cloud.InstanceType {
	seen := map[string]bool{}
	var out []*cloud.InstanceType
	for i := range pools {
		for _, it := range pools[i].InstanceTypes {
			if !seen[it.Name] && len(modelSlices("model", it)) > 0 {
				seen[it.Name] = true
				out = append(out, it)
			}
		}
	}
	slices.SortFunc(out, func(a, b *cloud.InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// modelSlices are the devices of a node of the type, launched with every EFA interface it takes (as it is for pods
// that claim EFA devices).
func modelSlices(nodeName string, it *cloud.InstanceType) []*resourceapi.ResourceSlice {
	efa := it.Capacity[stevedorev1.ResourceEFA]
	return devices.Slices(nodeName, it.Labels(), int(efa.Value()))
}

// typeFit is where a pod's claims fit: the instance types, and the devices they take there.
type typeFit struct {
	types []string
	taken map[corev1.ResourceName]int
}

// fitKey says what a fit depends on besides the cluster's classes and the types: the specs of the pod's claims and
// its containers' requests (extended resources a class may serve); "" when a claim is allocated already (its
// devices decide).
func fitKey(pod *corev1.Pod, claims []*resourceapi.ResourceClaim) string {
	var key struct {
		Specs    []resourceapi.ResourceClaimSpec
		Requests []corev1.ResourceList
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			return ""
		}
		key.Specs = append(key.Specs, c.Spec)
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		key.Requests = append(key.Requests, c.Resources.Requests)
	}
	b, err := json.Marshal(key)
	if err != nil {
		return ""
	}
	return string(b)
}

// translate fits a pod's claims on every modelled type (or takes the fit of a pod whose claims ask the same, from
// fits); it returns the pod the solver places, or the refusal saying why none fits (errClaimNotCreated while the pod
// waits for its claim).
func (d *deviceTypes) translate(ctx context.Context, objects DeviceObjects, pod *corev1.Pod, types []*cloud.InstanceType,
	fits map[string]typeFit) (solverPod *corev1.Pod, refusal, err error) {
	claims, why := podClaims(objects, pod)
	if why != nil {
		return nil, why, nil
	}
	key := fitKey(pod, claims)
	if fit, ok := fits[key]; ok && key != "" {
		return onTypesTaking(pod, fit.types, fit.taken), nil, nil
	}
	var classes []*resourceapi.DeviceClass
	if objects.Classes != nil {
		list, err := objects.Classes.List(labels.Everything())
		if err != nil {
			return nil, nil, err
		}
		classes = list
	}
	fit, lastRefusal, err := d.fitTypes(ctx, pod, claims, classes, types)
	if err != nil {
		return nil, nil, err
	}
	if len(fit.types) == 0 {
		return nil, claimsRefused(claims, lastRefusal), nil
	}
	if key != "" {
		fits[key] = fit
	}
	return onTypesTaking(pod, fit.types, fit.taken), nil, nil
}

// fitTypes runs the fit of the pod's claims on a node of each type; with no type fitting, the last refusal says why.
func (d *deviceTypes) fitTypes(ctx context.Context, pod *corev1.Pod, claims []*resourceapi.ResourceClaim, classes []*resourceapi.DeviceClass,
	types []*cloud.InstanceType) (fit typeFit, lastRefusal, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fitter == nil {
		if d.fitter, err = simulation.NewDeviceFitter(ctx); err != nil {
			return typeFit{}, nil, err
		}
	}
	fit.taken = map[corev1.ResourceName]int{}
	for _, it := range types {
		node := &corev1.Node{}
		node.Name = "stevedore-device-model"
		node.Labels = it.Labels()
		devs, err := d.fitter.Fit(ctx, pod, node, modelSlices(node.Name, it), simulation.DeviceObjects{Claims: claims, Classes: classes})
		if err != nil {
			lastRefusal = err
			continue
		}
		fit.types = append(fit.types, it.Name)
		for driver, resource := range devices.Resources() {
			fit.taken[resource] = max(fit.taken[resource], devs.Count(driver))
		}
	}
	return fit, lastRefusal, nil
}

// claimsRefused says that no type satisfies the claims, naming them and their requests, with the plugin's reason.
func claimsRefused(claims []*resourceapi.ResourceClaim, lastRefusal error) error {
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		var requests []string
		for _, r := range c.Spec.Devices.Requests {
			requests = append(requests, r.Name)
		}
		names = append(names, fmt.Sprintf("ResourceClaim %s/%s (requests %s)", c.Namespace, c.Name, strings.Join(requests, ", ")))
	}
	why := fmt.Sprintf("%s: no instance type the NodePools may launch has devices that satisfy it", strings.Join(names, ", "))
	if lastRefusal != nil {
		why += " (" + lastRefusal.Error() + ")"
	}
	return errors.New(why)
}

// errClaimNotCreated says a pod's claim from a template does not exist yet.
var errClaimNotCreated = errors.New("the pod's ResourceClaim is not created yet")

// podClaims returns a pod's ResourceClaims (one from a template through the pod's status), or why it has none:
// errClaimNotCreated while one is still to be created from its template. A claim made from a template for the pod
// is returned unallocated: the pod placed anew gets a new one. A claim shared by name keeps its allocation, and
// with it the node its devices are on.
func podClaims(objects DeviceObjects, pod *corev1.Pod) ([]*resourceapi.ResourceClaim, error) {
	if objects.Claims == nil {
		return nil, errors.New("the pod claims devices, and Stevedore reads no ResourceClaims (resource.k8s.io/v1 is not served)")
	}
	var out []*resourceapi.ResourceClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimName(pod, pc)
		if name == "" {
			if pc.ResourceClaimTemplateName != nil {
				return nil, fmt.Errorf("%w (from template %s, for %s)", errClaimNotCreated, *pc.ResourceClaimTemplateName, pc.Name)
			}
			continue
		}
		claim, err := objects.Claims.ResourceClaims(pod.Namespace).Get(name)
		if apierrors.IsNotFound(err) && pc.ResourceClaimTemplateName != nil {
			return nil, fmt.Errorf("%w (%s/%s)", errClaimNotCreated, pod.Namespace, name)
		}
		if err != nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s: %w", pod.Namespace, name, err)
		}
		if claim.Status.Allocation != nil && pc.ResourceClaimTemplateName != nil && metav1.IsControlledBy(claim, pod) {
			// a pod moved (disruption's model) is a new pod, with a new claim from the template: this one's devices
			// go with the pod it was made for
			fresh := claim.DeepCopy()
			fresh.Status = resourceapi.ResourceClaimStatus{}
			claim = fresh
		}
		out = append(out, claim)
	}
	return out, nil
}

// claimName is the name of the pod's claim pc: its own, or the one kube-controller-manager made from its template
// and recorded in the pod's status ("" until then).
func claimName(pod *corev1.Pod, pc corev1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName
		}
	}
	return ""
}

// onTypesTaking is the pod the solver places: kept to the instance types named, and taking the devices counted.
func onTypesTaking(pod *corev1.Pod, types []string, taken map[corev1.ResourceName]int) *corev1.Pod {
	out := podutil.Requiring(pod, corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types})
	addDevices(out, taken)
	return out
}

// addDevices adds the devices counted to the requests and limits of the pod's first container.
func addDevices(pod *corev1.Pod, taken map[corev1.ResourceName]int) {
	if len(pod.Spec.Containers) == 0 {
		return
	}
	c := &pod.Spec.Containers[0]
	for name, n := range taken {
		if n <= 0 {
			continue
		}
		for _, rl := range []*corev1.ResourceList{&c.Resources.Requests, &c.Resources.Limits} {
			if *rl == nil {
				*rl = corev1.ResourceList{}
			}
			q := (*rl)[name]
			q.Add(*resource.NewQuantity(int64(n), resource.DecimalSI))
			(*rl)[name] = q
		}
	}
}

// withAllocatedDevices is a pod on a node as the solver counts it there: taking the devices allocated to its claims
// (a claim shared by several pods counted with the first it is reserved for), so that the room left on the node
// for pods planned there is what its devices have left.
func withAllocatedDevices(objects DeviceObjects, pod *corev1.Pod) *corev1.Pod {
	if len(pod.Spec.ResourceClaims) == 0 || objects.Claims == nil {
		return pod
	}
	taken := map[corev1.ResourceName]int{}
	resources := devices.Resources()
	for _, pc := range pod.Spec.ResourceClaims {
		claim, err := objects.Claims.ResourceClaims(pod.Namespace).Get(claimName(pod, pc))
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		if len(claim.Status.ReservedFor) > 0 && claim.Status.ReservedFor[0].UID != pod.UID && !metav1.IsControlledBy(claim, pod) {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if name, ok := resources[r.Driver]; ok {
				taken[name]++
			}
		}
	}
	if len(taken) == 0 {
		return pod
	}
	out := pod.DeepCopy()
	addDevices(out, taken)
	return out
}

// DeviceObjectsOf serves the given claims and classes (an offline input's) as listers.
func DeviceObjectsOf(claims []*resourceapi.ResourceClaim, classes []*resourceapi.DeviceClass) (DeviceObjects, error) {
	claimIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range claims {
		if err := claimIndex.Add(c); err != nil {
			return DeviceObjects{}, err
		}
	}
	classIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range classes {
		if err := classIndex.Add(c); err != nil {
			return DeviceObjects{}, err
		}
	}
	return DeviceObjects{Claims: resourcelisters.NewResourceClaimLister(claimIndex), Classes: resourcelisters.NewDeviceClassLister(classIndex)}, nil
}
