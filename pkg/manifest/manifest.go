/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package manifest reads Kubernetes objects from YAML or JSON files, as kubectl would: multi-document YAML, JSON,
// and v1 Lists, decoded into typed core, apps, batch, node, policy and Stevedore objects (Karpenter's NodePools,
// NodeClaims, NodeOverlays and EC2NodeClasses too, read as Stevedore's); and expands workloads into the pods their
// controllers would create (Expand).
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Decoder decodes the object kinds Stevedore's tools read.
type Decoder struct {
	codecs serializer.CodecFactory
	// ignored are the fields of Karpenter's objects Stevedore does not read, one line each
	ignored []string
}

// Karpenter's API groups, whose NodePools, NodeClaims, NodeOverlays and EC2NodeClasses are read as Stevedore's.
const (
	KarpenterGroup    = "karpenter.sh"
	KarpenterAWSGroup = "karpenter.k8s.aws"
)

// karpenterKinds are Karpenter's kinds Stevedore reads, with the Stevedore type each is read as.
func karpenterKinds() map[schema.GroupVersionKind]runtime.Object {
	return map[schema.GroupVersionKind]runtime.Object{
		{Group: KarpenterGroup, Version: "v1", Kind: "NodePool"}:              &stevedorev1.NodePool{},
		{Group: KarpenterGroup, Version: "v1", Kind: "NodeClaim"}:             &stevedorev1.NodeClaim{},
		{Group: KarpenterGroup, Version: "v1alpha1", Kind: "NodeOverlay"}:     &stevedorev1.NodeOverlay{},
		{Group: KarpenterAWSGroup, Version: "v1", Kind: "EC2NodeClass"}:       &stevedorev1.EC2NodeClass{},
		{Group: KarpenterGroup, Version: "v1", Kind: "NodePoolList"}:          &stevedorev1.NodePoolList{},
		{Group: KarpenterGroup, Version: "v1", Kind: "NodeClaimList"}:         &stevedorev1.NodeClaimList{},
		{Group: KarpenterGroup, Version: "v1alpha1", Kind: "NodeOverlayList"}: &stevedorev1.NodeOverlayList{},
		{Group: KarpenterAWSGroup, Version: "v1", Kind: "EC2NodeClassList"}:   &stevedorev1.EC2NodeClassList{},
	}
}

// NewDecoder returns a Decoder that knows core/v1, apps/v1, batch/v1, node.k8s.io/v1, policy/v1, autoscaling/v2
// (HorizontalPodAutoscalers, which plan --disrupt reads), resource.k8s.io/v1 (the claims and classes of pods that
// claim devices), stevedore.dev/v1,
// the autoscaling.x-k8s.io/v1beta1 CapacityBuffer, and Karpenter's karpenter.sh/v1 NodePool and NodeClaim, karpenter.sh/v1alpha1 NodeOverlay and
// karpenter.k8s.aws/v1 EC2NodeClass (read as Stevedore's kinds of the same name, which mirror them).
func NewDecoder() *Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		nodev1.AddToScheme, policyv1.AddToScheme, resourcev1.AddToScheme, stevedorev1.AddToScheme, autoscalingv1beta1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // only on a programming error: the schemes above are static
		}
	}
	for gvk, obj := range karpenterKinds() {
		scheme.AddKnownTypeWithName(gvk, obj)
	}
	return &Decoder{codecs: serializer.NewCodecFactory(scheme, serializer.EnableStrict)}
}

// IsKarpenter reports whether an object was read from Karpenter's API (its apiVersion is Karpenter's).
func IsKarpenter(obj runtime.Object) bool {
	g := obj.GetObjectKind().GroupVersionKind().Group
	return g == KarpenterGroup || g == KarpenterAWSGroup
}

// Ignored lists, one line each, the fields of the Karpenter objects decoded so far that Stevedore does not read
// (their status aside): they were left out of the objects returned.
func (d *Decoder) Ignored() []string { return d.ignored }

// strictOrKarpenter returns err, unless it only says that a Karpenter object has fields Stevedore does not read:
// those are recorded (Ignored) and the object, decoded without them, is kept.
func (d *Decoder) strictOrKarpenter(obj runtime.Object, err error) error {
	if err == nil || obj == nil || !runtime.IsStrictDecodingError(err) || !IsKarpenter(obj) {
		return err
	}
	var strict interface{ Errors() []error }
	if !errors.As(err, &strict) {
		return err
	}
	for _, e := range strict.Errors() {
		field := strings.TrimPrefix(strings.Trim(strings.TrimPrefix(e.Error(), "unknown field "), `"`), ".")
		if strings.HasPrefix(field, "status.") {
			continue // what Karpenter observed: Stevedore reads its own status fields only
		}
		d.ignored = append(d.ignored, fmt.Sprintf("%s (%s): %s is not a field Stevedore reads", Name(obj),
			obj.GetObjectKind().GroupVersionKind().GroupVersion(), field))
	}
	return nil
}

// Decode reads every object from r, flattening Lists.
func (d *Decoder) Decode(r io.Reader) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	deserializer := d.codecs.UniversalDeserializer()
	var out []runtime.Object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		obj, _, err := deserializer.Decode(raw, nil, nil)
		if err = d.strictOrKarpenter(obj, err); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, explain(raw, err))
		}
		if list, ok := obj.(*corev1.List); ok {
			items, err := d.decodeList(list)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			out = append(out, items...)
			continue
		}
		if meta.IsListType(obj) { // a typed list (NodePoolList...): its items
			items, err := meta.ExtractList(obj)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			for _, item := range items {
				item.GetObjectKind().SetGroupVersionKind(itemKind(obj))
			}
			out = append(out, items...)
			continue
		}
		out = append(out, obj)
	}
}

// itemKind is the kind of a typed list's items: the list's kind without List, in its group and version.
func itemKind(list runtime.Object) schema.GroupVersionKind {
	gvk := list.GetObjectKind().GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return gvk
}

func (d *Decoder) decodeList(list *corev1.List) ([]runtime.Object, error) {
	var out []runtime.Object
	for i, item := range list.Items {
		obj, _, err := d.codecs.UniversalDeserializer().Decode(item.Raw, nil, nil)
		if err = d.strictOrKarpenter(obj, err); err != nil {
			return nil, fmt.Errorf("list item %d: %w", i, explain(item.Raw, err))
		}
		out = append(out, obj)
	}
	return out, nil
}

// explain says what to do about an object of a kind the decoder does not know: Karpenter's NodePool and
// EC2NodeClass are read as Stevedore's once their apiVersion says so.
func explain(raw []byte, err error) error {
	if !runtime.IsNotRegisteredError(err) && !runtime.IsMissingKind(err) && !runtime.IsMissingVersion(err) {
		return err
	}
	var tm metav1.TypeMeta
	if yaml.Unmarshal(raw, &tm) != nil || tm.Kind == "" {
		return err
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = yaml.Unmarshal(raw, &meta)
	name := tm.Kind + "/" + meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		name = tm.Kind + "/" + meta.Metadata.Namespace + "/" + meta.Metadata.Name
	}
	switch tm.GroupVersionKind().Group {
	case KarpenterGroup, KarpenterAWSGroup:
		return fmt.Errorf("%s (apiVersion %s) is a Karpenter kind Stevedore does not read: it reads karpenter.sh/v1 NodePools and NodeClaims, karpenter.sh/v1alpha1 NodeOverlays and karpenter.k8s.aws/v1 EC2NodeClasses", name, tm.APIVersion)
	}
	return fmt.Errorf("%s (apiVersion %s) is not a kind Stevedore reads: NodePool, EC2NodeClass, NodeOverlay, NodeClaim (Stevedore's or Karpenter's), Commitment, Pod, Deployment, ReplicaSet, StatefulSet, Job, CronJob, DaemonSet, Node, RuntimeClass, PodDisruptionBudget, HorizontalPodAutoscaler, autoscaling.x-k8s.io/v1beta1 CapacityBuffer and CapacityQuota, or a List of them", name, tm.APIVersion)
}

// DecodeFile reads every object of a file.
func (d *Decoder) DecodeFile(path string) ([]runtime.Object, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the path is the user's own --filename argument
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := d.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Name returns "kind/name" or "kind/namespace/name" of an object for messages.
func Name(obj runtime.Object) string {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if acc.GetNamespace() != "" {
		return kind + "/" + acc.GetNamespace() + "/" + acc.GetName()
	}
	return kind + "/" + acc.GetName()
}

func isOnlyComments(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
