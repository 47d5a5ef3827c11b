/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokv1alpha1 "sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	kwokversioned "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	kwokcontrollers "sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwokclient "sigs.k8s.io/kwok/pkg/utils/client"
	"sigs.k8s.io/yaml"
)

// KwokNodeAnnotation marks the Nodes the simulated kubelets manage.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
)

// podReadyAgain is a stage of our own: a running pod whose Ready condition someone else turned off (the
// node-lifecycle controller does when a node's heartbeat is late, as it can be on a loaded machine) is reported
// ready again once its node's simulated kubelet handles it, as a real kubelet's status sync does. kwok's own
// stages only make a Pending pod ready.
const podReadyAgain = `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - type: ContainersReady
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
      - type: Ready
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
`

// AnnotationReadyAfter on a pod (a duration, such as "5s") delays its readiness in the sandbox: it is Pending,
// not Ready, for that long after it is bound, as a container that starts and then passes its readiness probe.
const AnnotationReadyAfter = "sandbox.stevedore.dev/ready-after"

// readyAfter delays kwok's pod-ready stage by the pod's AnnotationReadyAfter (none without it).
func readyAfter() *kwokv1alpha1.StageDelay {
	zero := int64(0)
	return &kwokv1alpha1.StageDelay{DurationMilliseconds: &zero, DurationFrom: &kwokv1alpha1.ExpressionFrom{
		JQ: &kwokv1alpha1.ExpressionJQ{Expression: fmt.Sprintf(".metadata.annotations[%q]", AnnotationReadyAfter)}}}
}

// startKwok runs kwok's simulated kubelets in this process: Nodes annotated kwok.x-k8s.io/node=fake report
// Ready and renew their Lease, pods bound to them become Running, Job pods complete, deleted pods go away.
func startKwok(ctx context.Context, kubeconfig string, leaseDuration time.Duration) error {
	stages := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range []string{nodefast.DefaultNodeInit, nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady, podReadyAgain, podfast.DefaultPodComplete, podfast.DefaultPodDelete} {
		var st kwokv1alpha1.Stage
		if err := yaml.Unmarshal([]byte(raw), &st); err != nil {
			return fmt.Errorf("kwok stage: %w", err)
		}
		if st.Name == "pod-ready" {
			st.Spec.Delay = readyAfter()
		}
		kwokv1alpha1.SetObjectDefaults_Stage(&st)
		in, err := internalversion.ConvertToInternalStage(&st)
		if err != nil {
			return fmt.Errorf("kwok stage: %w", err)
		}
		stages[in.Spec.ResourceRef] = append(stages[in.Spec.ResourceRef], in)
	}
	cs, err := kwokclient.NewClientset("", kubeconfig)
	if err != nil {
		return err
	}
	restConfig, err := cs.ToRESTConfig()
	if err != nil {
		return err
	}
	dyn, err := cs.ToDynamicClient()
	if err != nil {
		return err
	}
	mapper, err := cs.ToRESTMapper()
	if err != nil {
		return err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return err
	}
	typed, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	kwokTyped, err := kwokversioned.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	id, err := kwokcontrollers.Identity()
	if err != nil {
		return err
	}
	ctr, err := kwokcontrollers.NewController(kwokcontrollers.Config{
		Clock:                             clock.RealClock{},
		DynamicClient:                     dyn,
		RESTClient:                        restClient,
		RESTMapper:                        mapper,
		ImpersonatingDynamicClient:        cs.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:          cs.ToImpersonatingTypedClient(),
		TypedClient:                       typed,
		TypedKwokClient:                   kwokTyped,
		ManageNodesWithAnnotationSelector: KwokNodeAnnotation + "=" + KwokNodeValue,
		CIDR:                              "10.64.0.0/10", // room for a million pod IPs
		NodeIP:                            "10.1.0.1",
		LocalStages:                       stages,
		PodPlayStageParallelism:           8,
		NodePlayStageParallelism:          4,
		NodeLeaseParallelism:              4,
		PodsOnNodeSyncParallelism:         2,
		NodeLeaseDurationSeconds:          uint(max(leaseDuration/time.Second, 1)), //nolint:gosec // G115: at least 1, and a positive Duration in seconds fits a uint
		ID:                                id,
	})
	if err != nil {
		return err
	}
	// kwok logs every patch at info level through slog; keep its warnings and errors only.
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(os.Stderr, kwoklog.LevelWarn))
	return ctr.Start(ctx)
}
