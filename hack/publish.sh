#!/usr/bin/env bash
# make publish REGISTRY=<registry>/<path> VERSION=vX.Y.Z: builds the release (hack/release.sh, its image and charts
# naming <registry>/<path>) and pushes it:
#   <registry>/<path>/scheduler:<version>      the image index, linux/amd64 and linux/arm64 (hack/image push)
#   oci://<registry>/<path>/stevedore           the chart, version X.Y.Z (helm push)
#   oci://<registry>/<path>/stevedore-crd       the CRD chart, version X.Y.Z (helm push)
# Log in once with `helm registry login <registry>`: the image push reads the same credentials when there is no
# Docker configuration (DOCKER_CONFIG, ~/.docker/config.json). PLAIN_HTTP=1 speaks HTTP to the registry (a local
# test registry). RELEASE_DIR, RELEASE_ALLOW_DIRTY and IMAGE_ARCHS pass through to hack/release.sh, and so do
# COSIGN_KEY and COSIGN_TLOG, with which the image, its SBOMs (as CycloneDX attestations) and both charts are
# signed in the registry (cosign sign, cosign attest), by digest.
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

cosign=()
if [[ -n ${COSIGN_KEY:-} ]]; then
  cosign=("$bin/cosign")
  [[ ${PLAIN_HTTP:-} == 1 ]] && cosign_registry=(--allow-http-registry --allow-insecure-registry) || cosign_registry=()
fi
# sign signs an artifact in the registry by digest (no-op for an unsigned release)
sign() {
  [[ ${#cosign[@]} -gt 0 ]] || return 0
  "${cosign[@]}" sign --yes --key "$COSIGN_KEY" --tlog-upload="${COSIGN_TLOG:-true}" "${cosign_registry[@]}" "$1" >/dev/null
}

echo "--- push ${registry}/scheduler:${version}"
archive=$(cd "$out" && pwd)/stevedore-image-${version}.tar
pushed=$(cd hack/image && go run . push --archive "$archive" --to "${registry}/scheduler:${version}")
echo "$pushed"
image="${pushed#pushed }"
image="${registry}/scheduler@${image##*@}"
sign "$image"
if [[ ${#cosign[@]} -gt 0 ]]; then
  for sbom in "$out"/stevedore-sbom-"${version}"-linux-*.cdx.json; do
    "${cosign[@]}" attest --yes --key "$COSIGN_KEY" --tlog-upload="${COSIGN_TLOG:-true}" "${cosign_registry[@]}" \
      --type cyclonedx --predicate "$sbom" "$image" >/dev/null
  done
fi
for chart in stevedore stevedore-crd; do
  echo "--- push oci://${registry}/${chart} ${semver}"
  pushed=$("$bin/helm" push "$out/${chart}-${semver}.tgz" "oci://${registry}" "${plain[@]}" 2>&1)
  echo "$pushed"
  digest=$(sed -n 's/^Digest: //p' <<<"$pushed")
  [[ -n $digest ]] || die "helm push printed no digest for ${chart}"
  sign "${registry}/${chart}@${digest}"
done
echo "published ${version} to ${registry}"
