/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Recover scales back the surges no Move of this process is running: left by a process that stopped, or whose
// scale-back failed (the API server unreachable). Owners recorded as surging whose replicas are still the surge's
// return to what they had; the records are removed. It reads the informers' caches and writes only where a record
// is found.
func (s *Surger) Recover(ctx context.Context) {
	var owners []Owner
	if ds, err := s.opts.Deployments.List(labels.Everything()); err == nil {
		for _, d := range ds {
			if d.Annotations[stevedorev1.AnnotationSurge] != "" {
				owners = append(owners, Owner{Kind: kindDeployment, Namespace: d.Namespace, Name: d.Name})
			}
		}
	}
	if rss, err := s.opts.ReplicaSets.List(labels.Everything()); err == nil {
		for _, rs := range rss {
			if rs.Annotations[stevedorev1.AnnotationSurge] != "" && metav1.GetControllerOf(rs) == nil {
				owners = append(owners, Owner{Kind: kindReplicaSet, Namespace: rs.Namespace, Name: rs.Name})
			}
		}
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].String() < owners[j].String() })
	for _, o := range owners {
		// held while it is recovered, so that no Move starts surging it meanwhile
		if !s.hold(o) {
			continue
		}
		s.recover(ctx, o)
		s.release(o)
	}
}

func (s *Surger) recover(ctx context.Context, o Owner) {
	logger := klog.FromContext(ctx)
	// the cache may still show the record of a surge that just ended: the owner itself says
	raw, err := s.recorded(ctx, o)
	if err != nil || raw == "" {
		return
	}
	var from, to int32
	if _, err := fmt.Sscanf(raw, "%d:%d", &from, &to); err != nil {
		logger.Error(err, "A surge record is not understood; removing it", "owner", o.String(), "record", raw)
		_ = s.annotate(ctx, o, "")
		return
	}
	if err := s.scaleBack(ctx, &surging{owner: o, from: from, to: to}); err != nil {
		logger.Error(err, "Scaling back a surge no command holds", "owner", o.String())
		return
	}
	logger.Info("Scaled back a surge no command holds", "owner", o.String(), "replicas", from)
}

func (s *Surger) recorded(ctx context.Context, o Owner) (string, error) {
	var meta metav1.Object
	var err error
	if o.Kind == kindDeployment {
		meta, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	} else {
		meta, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", err
	}
	return meta.GetAnnotations()[stevedorev1.AnnotationSurge], nil
}

func (s *Surger) getScale(ctx context.Context, o Owner) (*autoscalingv1.Scale, error) {
	if o.Kind == kindDeployment {
		return s.opts.Kube.AppsV1().Deployments(o.Namespace).GetScale(ctx, o.Name, metav1.GetOptions{})
	}
	return s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).GetScale(ctx, o.Name, metav1.GetOptions{})
}

func (s *Surger) updateScale(ctx context.Context, o Owner, scale *autoscalingv1.Scale) error {
	var err error
	if o.Kind == kindDeployment {
		_, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).UpdateScale(ctx, o.Name, scale, metav1.UpdateOptions{})
	} else {
		_, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).UpdateScale(ctx, o.Name, scale, metav1.UpdateOptions{})
	}
	return err
}

// annotate sets the owner's surge record (removes it when value is "").
func (s *Surger) annotate(ctx context.Context, o Owner, value string) error {
	v := "null"
	if value != "" {
		v = strconv.Quote(value)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, stevedorev1.AnnotationSurge, v))
	var err error
	if o.Kind == kindDeployment {
		_, err = s.opts.Kube.AppsV1().Deployments(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = s.opts.Kube.AppsV1().ReplicaSets(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}
