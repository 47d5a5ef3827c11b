#!/usr/bin/env bash
# Regenerates deepcopy, CRD YAML and the typed clients, listers and informers from pkg/apis.
# Usage: hack/generate.sh BIN_DIR   (BIN_DIR holds controller-gen, client-gen, lister-gen, informer-gen)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "$1" && pwd)
module=github.com/stevedore-dev/stevedore
header=hack/boilerplate.go.txt

"$bin/controller-gen" object:headerFile="$header" paths=./pkg/apis/...
rm -f manifests/crds/stevedore.dev_*.yaml manifests/crds/scheduling.x-k8s.io_*.yaml manifests/crds/autoscaling.x-k8s.io_*.yaml
"$bin/controller-gen" crd:generateEmbeddedObjectMeta=false paths=./pkg/apis/... output:crd:artifacts:config=manifests/crds
# the Helm chart carries the same CRDs (charts cannot reach outside their directory)
rm -f charts/stevedore/crds/*.yaml
# and the coscheduling PodGroup and ProvisioningRequest CRDs (Helm skips a CRD in crds/ that the cluster has
# already, as where scheduler-plugins, Kubeflow or Cluster Autoscaler installed it)
cp manifests/crds/stevedore.dev_*.yaml manifests/crds/scheduling.x-k8s.io_*.yaml manifests/crds/autoscaling.x-k8s.io_*.yaml charts/stevedore/crds/
# ... and the CRD chart as templates (so that helm upgrade upgrades them), kept on uninstall
rm -f charts/stevedore-crd/templates/*.yaml
for f in manifests/crds/stevedore.dev_*.yaml; do
  awk '{print} /^  annotations:$/ && !done {print "    helm.sh/resource-policy: keep"; done=1}' "$f" > "charts/stevedore-crd/templates/$(basename "$f")"
done

rm -rf pkg/generated
"$bin/client-gen" --go-header-file "$header" --output-dir pkg/generated/clientset --output-pkg "$module/pkg/generated/clientset" \
  --clientset-name versioned --input-base "$module/pkg" --input apis/v1 --input apis/scheduling/v1alpha1 --input apis/autoscaling/v1 --input apis/autoscaling/v1beta1
"$bin/lister-gen" --go-header-file "$header" --output-dir pkg/generated/listers --output-pkg "$module/pkg/generated/listers" \
  ./pkg/apis/v1 ./pkg/apis/scheduling/v1alpha1 ./pkg/apis/autoscaling/v1 ./pkg/apis/autoscaling/v1beta1
"$bin/informer-gen" --go-header-file "$header" --output-dir pkg/generated/informers --output-pkg "$module/pkg/generated/informers" \
  --versioned-clientset-package "$module/pkg/generated/clientset/versioned" --listers-package "$module/pkg/generated/listers" \
  ./pkg/apis/v1 ./pkg/apis/scheduling/v1alpha1 ./pkg/apis/autoscaling/v1 ./pkg/apis/autoscaling/v1beta1
gofmt -w pkg/generated pkg/apis
