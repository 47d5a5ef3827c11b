/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package client builds the Kubernetes clients Stevedore uses from one rest.Config.
package client

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
)

// Client-side rate limits of Stevedore's own clients: launching hundreds of nodes writes NodeClaims, Nodes and
// pod nominations in bursts, which the scheduler's default 50 QPS would queue for seconds.
const (
	QPS   = 200
	Burst = 400
)

// NewStevedore returns a clientset for Stevedore's resources. Custom resources have no protobuf encoding, so
// the configuration is copied to speak JSON even when the scheduler's own connection prefers protobuf.
func NewStevedore(cfg *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.QPS, c.Burst = QPS, Burst
	return versioned.NewForConfig(c)
}

// NewKube returns a Kubernetes clientset for Stevedore's controllers, with their own rate limits.
func NewKube(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = QPS, Burst
	return kubernetes.NewForConfig(c)
}

// Discover reports whether the cluster serves resource in gv; err is a discovery that failed for another reason
// than the group version being absent, which leaves the answer unknown.
func Discover(disc discovery.DiscoveryInterface, gv schema.GroupVersion, resource string) (bool, error) {
	resources, err := disc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}
