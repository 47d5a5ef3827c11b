#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: the artifacts of a release, from a clean tree, in $RELEASE_DIR (default
# dist/<version>):
#   stevedore-image-<version>.tar        the multi-arch OCI image archive (IMAGE_ARCHS, default amd64 arm64)
#   stevedore-<X.Y.Z>.tgz                the Helm chart, version X.Y.Z, appVersion and image tag <version>
#   stevedore-crd-<X.Y.Z>.tgz            the CRD chart (the CRDs as templates, upgraded by helm upgrade)
#   stevedore-crds-<version>.yaml        the CRDs
#   stevedore-manifests-<version>.tar.gz the kustomize base (manifests/), its image pinned to <version>
#   stevedore-terraform-<version>.tar.gz the Terraform example with the chart and IAM policy it uses, pinned
#   stevedore-sbom-<version>-linux-<arch>.cdx.json  the CycloneDX SBOM of each architecture's binary: every Go
#                                        module linked in, with its version (cyclonedx-gomod, from the binary's build info)
#   RELEASE_NOTES.md                     the CHANGELOG.md section of the version
#   SHA256SUMS                           checksums of all of the above
#   SHA256SUMS.sig, cosign.pub           the checksums' signature (cosign sign-blob) and the key that verifies it
# COSIGN_KEY is the signing key, any key reference cosign takes (a cosign.key file with COSIGN_PASSWORD, or a KMS
# key: awskms:///alias/<name>); a release is not built without one unless RELEASE_UNSIGNED=1. COSIGN_TLOG=false
# keeps the signature out of Sigstore's public transparency log (Rekor), for a registry or machine that cannot
# reach it.
# IMAGE_REPOSITORY (default public.ecr.aws/stevedore/scheduler) is the repository the image is pushed to and the
# artifacts name. RELEASE_ALLOW_DIRTY=1 skips the clean-tree check (the release test runs on a work tree).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "release: $*" >&2; exit 1; }

version=${VERSION:-}
[[ $version =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] ||
  die "VERSION must be a semantic version with a leading v (v1.2.3 or v1.2.3-rc.1), not '${version}'"
semver=${BASH_REMATCH[1]}
if [[ ${RELEASE_ALLOW_DIRTY:-} != 1 && -n $(git status --porcelain 2>/dev/null) ]]; then
  die "the work tree has uncommitted changes: a release is built from a commit"
fi
grep -q "^## \[${semver}\]" CHANGELOG.md || die "CHANGELOG.md has no section '## [${semver}]'"
if [[ -z ${COSIGN_KEY:-} && ${RELEASE_UNSIGNED:-} != 1 ]]; then
  die "COSIGN_KEY names no signing key (a cosign.key file or a KMS key such as awskms:///alias/stevedore-release); RELEASE_UNSIGNED=1 builds an unsigned release"
fi
repository=${IMAGE_REPOSITORY:-public.ecr.aws/stevedore/scheduler}
image="${repository}:${version}"
bin=${BIN:-$PWD/bin}
out=${RELEASE_DIR:-dist/${version}}
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

echo "--- image ${image} (${IMAGE_ARCHS:-amd64 arm64})"
make --no-print-directory image VERSION="$version" IMAGE_ARCHS="${IMAGE_ARCHS:-amd64 arm64}"
cp "$bin/stevedore-image.tar" "$out/stevedore-image-${version}.tar"

echo "--- chart ${semver}"
mkdir -p "$stage/charts"
cp -r charts/stevedore "$stage/charts/"
sed -i "s#^image: .*#image: ${image}#" "$stage/charts/stevedore/values.yaml"
"$bin/helm" package "$stage/charts/stevedore" --version "$semver" --app-version "$version" --destination "$out" >/dev/null

echo "--- CRD chart ${semver}"
"$bin/helm" package charts/stevedore-crd --version "$semver" --app-version "$version" --destination "$out" >/dev/null

echo "--- CRDs"
cat manifests/crds/stevedore.dev_*.yaml > "$out/stevedore-crds-${version}.yaml"

echo "--- kustomize base"
cp -r manifests "$stage/manifests"
rm -f "$stage/manifests/embed.go"
sed -i "s#image: [^ ]*scheduler:[^ ]*#image: ${image}#" "$stage/manifests/deploy/deployment.yaml"
tar -C "$stage" -czf "$out/stevedore-manifests-${version}.tar.gz" manifests

echo "--- Terraform"
mkdir -p "$stage/tf/deploy"
cp -r deploy/terraform deploy/iam "$stage/tf/deploy/"
cp -r "$stage/charts" "$stage/tf/charts"
cp -r charts/stevedore-crd "$stage/tf/charts/"
rm -f "$stage/tf/deploy/terraform/"*_test.go "$stage/tf/deploy/iam/"*.go
sed -i "s#default     = \"[^\"]*scheduler:[^\"]*\"#default     = \"${image}\"#" "$stage/tf/deploy/terraform/variables.tf"
tar -C "$stage/tf" -czf "$out/stevedore-terraform-${version}.tar.gz" deploy charts

echo "--- release notes"
awk -v v="$semver" '
  $0 ~ "^## \\[" v "\\]" {on=1; print "# Stevedore " "v" v; next}
  on && /^## \[/ {exit}
  on {print}' CHANGELOG.md > "$out/RELEASE_NOTES.md"

echo "--- SBOMs"
for arch in ${IMAGE_ARCHS:-amd64 arm64}; do
  "$bin/cyclonedx-gomod" bin -json -version "$version" -output "$out/stevedore-sbom-${version}-linux-${arch}.cdx.json" \
    "$bin/linux-${arch}/scheduler"
done

(cd "$out" && sha256sum -- * > SHA256SUMS)
if [[ -n ${COSIGN_KEY:-} ]]; then
  echo "--- signature of SHA256SUMS"
  "$bin/cosign" sign-blob --yes --key "$COSIGN_KEY" --tlog-upload="${COSIGN_TLOG:-true}" \
    --output-signature "$out/SHA256SUMS.sig" "$out/SHA256SUMS" >/dev/null
  "$bin/cosign" public-key --key "$COSIGN_KEY" > "$out/cosign.pub"
fi
echo "release ${version}: $out"
ls -l "$out"
