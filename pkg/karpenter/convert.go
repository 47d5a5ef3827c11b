/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package karpenter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// lastApplied is the annotation kubectl apply keeps the Karpenter manifest in: not carried over.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Conversion is what Convert made of Karpenter's objects.
type Conversion struct {
	// Objects are Stevedore's NodePools, EC2NodeClasses and NodeOverlays, in the input's order.
	Objects []runtime.Object
	// Left are what the conversion left out, one line each naming the object: what Stevedore refuses, and the
	// objects it does not convert (NodeClaims: Stevedore creates its own).
	Left []string
	// Notes say what to do before the objects work under Stevedore, one line each naming the object: the node
	// roles its IAM policy must let it pass.
	Notes []string
}

// Convert turns Karpenter's NodePools, EC2NodeClasses and NodeOverlays among objs (decoded by package manifest,
// whose ignored fields are given) into Stevedore's: the same spec under stevedore.dev/v1, node class references in
// Stevedore's group, without status and the fields the API server fills. What Stevedore refuses (Problems) or does
// not read (ignored) is an error, unless dropUnsupported: then it is left out and listed. The other objects of a
// cluster's dump (nodes, pods...) are not converted, and counted in one line of Left.
func Convert(objs []runtime.Object, ignored []string, dropUnsupported bool) (*Conversion, error) {
	out := &Conversion{}
	var unsupported []string
	unsupported = append(unsupported, ignored...)
	others := 0
	for _, obj := range objs {
		if b, ok := obj.(*autoscalingv1beta1.CapacityBuffer); ok {
			out.Left = append(out.Left, manifest.Name(b)+": not converted (Stevedore serves autoscaling.x-k8s.io CapacityBuffers as they are: keep it)")
			continue
		}
		if !manifest.IsKarpenter(obj) {
			others++
			continue
		}
		unsupported = append(unsupported, Problems(obj)...)
		switch o := obj.(type) {
		case *stevedorev1.NodePool:
			np := withoutRefused(o)
			np.Status = stevedorev1.NodePoolStatus{}
			if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Group == stevedorev1.KarpenterNodeClassGroup {
				ref.Group = stevedorev1.GroupName
			}
			out.Objects = append(out.Objects, asStevedore(np, "NodePool"))
		case *stevedorev1.EC2NodeClass:
			nc := o.DeepCopy()
			nc.Status = stevedorev1.EC2NodeClassStatus{}
			if note := roleNote(nc); note != "" {
				out.Notes = append(out.Notes, note)
			}
			out.Objects = append(out.Objects, asStevedore(nc, "EC2NodeClass"))
		case *stevedorev1.NodeOverlay:
			no := o.DeepCopy()
			no.Status = stevedorev1.NodeOverlayStatus{}
			out.Objects = append(out.Objects, asStevedore(no, "NodeOverlay"))
		case *stevedorev1.NodeClaim:
			out.Left = append(out.Left, manifest.Name(o)+": not converted (Stevedore creates NodeClaims of its own)")
		}
	}
	if len(unsupported) > 0 && !dropUnsupported {
		return nil, fmt.Errorf("not carried over to Stevedore (--drop-unsupported writes the manifests without them):\n  %s",
			strings.Join(unsupported, "\n  "))
	}
	out.Left = append(unsupported, out.Left...)
	switch {
	case others == 1:
		out.Left = append(out.Left, "1 object that is not Karpenter's NodePool, EC2NodeClass or NodeOverlay (a node, a pod or the like): not converted")
	case others > 1:
		out.Left = append(out.Left, fmt.Sprintf("%d objects that are not Karpenter's NodePools, EC2NodeClasses or NodeOverlays "+
			"(nodes, pods and the like): not converted", others))
	}
	return out, nil
}

// roleNote says what an EC2NodeClass that names a node role needs before it launches under Stevedore ("" when it
// names an instance profile instead).
func roleNote(nc *stevedorev1.EC2NodeClass) string {
	if nc.Spec.Role == "" || nc.Spec.InstanceProfile != nil {
		return ""
	}
	return fmt.Sprintf("ec2nodeclasses.stevedore.dev/%s keeps the node role %s: Stevedore makes its instance profile and "+
		"passes the role to EC2, so its IAM policy must allow iam:PassRole on that role (Terraform: additional_node_roles; "+
		"deploy/iam/README.md), or the NodeClass gets no instance profile and launches nothing", nc.Name, nc.Spec.Role)
}

// object is what asStevedore needs of an object.
type object interface {
	runtime.Object
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}

// asStevedore sets Stevedore's apiVersion and the kind, and drops the last-applied Karpenter manifest.
func asStevedore[T object](obj T, kind string) T {
	obj.GetObjectKind().SetGroupVersionKind(stevedorev1.SchemeGroupVersion.WithKind(kind))
	annotations := obj.GetAnnotations()
	delete(annotations, lastApplied)
	if len(annotations) == 0 {
		annotations = nil
	}
	obj.SetAnnotations(annotations)
	return obj
}

// WriteYAML writes objects as a multi-document YAML stream, without the fields the API server fills and without
// status.
func WriteYAML(objs []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for i, obj := range objs {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", manifest.Name(obj), err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, err
		}
		delete(doc, "status")
		if md, ok := doc["metadata"].(map[string]any); ok {
			for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
				delete(md, f)
			}
		}
		clean, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(clean)
	}
	if b.Len() == 0 {
		return nil, errors.New("no Karpenter NodePool, EC2NodeClass or NodeOverlay in the input")
	}
	return b.Bytes(), nil
}
