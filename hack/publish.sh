#!/usr/bin/env bash
# make publish REGISTRY=<registry>/<path> VERSION=vX.Y.Z: builds the release (hack/release.sh, its image and charts
# naming <registry>/<path>) and pushes it:
#   <registry>/<path>/scheduler:<version>      the image index, linux/amd64 and linux/arm64 (hack/image push)
#   oci://<registry>/<path>/stevedore           the chart, version X.Y.Z (helm push)
#   oci://<registry>/<path>/stevedore-crd       the CRD chart, version X.Y.Z (helm push)
# Log in once with `helm registry login <registry>`: the image push reads the same credentials when there is no
# Docker configuration (DOCKER_CONFIG, ~/.docker/config.json). PLAIN_HTTP=1 speaks HTTP to the registry (a local
# test registry). RELEASE_DIR, RELEASE_ALLOW_DIRTY and IMAGE_ARCHS pass through to hack/release.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "publish: $*" >&2; exit 1; }

registry=${REGISTRY:-}
[[ -n $registry && $registry != *://* && $registry != */ ]] ||
  die "REGISTRY names where to publish, as <registry>/<path> without a scheme (public.ecr.aws/stevedore), not '${registry}'"
version=${VERSION:-}
semver=${version#v}
bin=${BIN:-$PWD/bin}
out=${RELEASE_DIR:-dist/${version}}
export RELEASE_DIR=$out

IMAGE_REPOSITORY="${registry}/scheduler" BIN="$bin" VERSION="$version" hack/release.sh

helm_config=${HELM_REGISTRY_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/helm/registry/config.json}
if [[ -z ${DOCKER_CONFIG:-} && ! -f $HOME/.docker/config.json && -f $helm_config ]]; then
  export DOCKER_CONFIG
  DOCKER_CONFIG=$(dirname "$helm_config")
fi
plain=()
[[ ${PLAIN_HTTP:-} == 1 ]] && plain=(--plain-http)

echo "--- push ${registry}/scheduler:${version}"
archive=$(cd "$out" && pwd)/stevedore-image-${version}.tar
(cd hack/image && go run . push --archive "$archive" --to "${registry}/scheduler:${version}")
for chart in stevedore stevedore-crd; do
  echo "--- push oci://${registry}/${chart} ${semver}"
  "$bin/helm" push "$out/${chart}-${semver}.tgz" "oci://${registry}" "${plain[@]}"
done
echo "published ${version} to ${registry}"
