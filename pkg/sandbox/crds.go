/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/manifests"
)

// installCRDs creates Stevedore's CRDs (the same files `kubectl apply -k manifests/` applies) and waits until
// the API server serves them.
func installCRDs(ctx context.Context, cfg *rest.Config) error {
	files, err := fs.Glob(manifests.CRDs, "crds/*.yaml")
	if err != nil {
		return err
	}
	docs := map[string][]byte{}
	for _, f := range files {
		if docs[f], err = fs.ReadFile(manifests.CRDs, f); err != nil {
			return err
		}
	}
	return InstallCRDs(ctx, cfg, docs)
}

// InstallCRDs creates the CustomResourceDefinitions written in files (file name to YAML; one CRD a file), in the
// order of the files' names, and waits until the API server serves each. One that exists already is left as it is.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files map[string][]byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range slices.Sorted(maps.Keys(files)) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(files[f], &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s from %s: %w", crd.Name, f, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// InstallStevedore creates, in a cluster that never saw Stevedore (a sandbox started without its scheduler), what
// `kubectl apply -k manifests/` adds to the API for the scheduler binary to run against it: the CRDs and, where the
// API server serves MutatingAdmissionPolicy, the scheduling policy. It returns once both are served.
func InstallStevedore(ctx context.Context, cfg *rest.Config) error {
	if err := installCRDs(ctx, cfg); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = installAdmission(ctx, kube, 0)
	return err
}
