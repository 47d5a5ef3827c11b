#!/usr/bin/env bash
# bench-karpenter-live.sh SRC: Stevedore beside Karpenter live, in the same sandbox, on this machine in this
# sitting. SRC is a checkout of kubernetes-sigs/karpenter; it is copied to a scratch folder and its kwok provider
# (sigs.k8s.io/karpenter/kwok, the controller Karpenter's own scale tests run) built there, so nothing of it enters
# this repository. Then BenchmarkBesideKarpenterLive<N> of test/bench scales the same workload out with each side
# in fresh sandboxes, alternating which goes first, and reports per round and the medians and ranges.
#
# BENCH_LIVE_SIZES (default "1000 3000 5000"; 20000 is one more size, of one round unless STEVEDORE_LIVE_ROUNDS says
# otherwise) and STEVEDORE_LIVE_ROUNDS (default 3) change the work; STEVEDORE_LIVE_SIDES=stevedore (or karpenter) runs one side.
set -euo pipefail
src=${1:?usage: bench-karpenter-live.sh KARPENTER_CHECKOUT}
root=$(cd "$(dirname "$0")/.." && pwd)
sizes=${BENCH_LIVE_SIZES:-1000 3000 5000}
if [[ ! -f "$src/go.mod" ]] || ! grep -q '^module sigs.k8s.io/karpenter$' "$src/go.mod"; then
  echo "bench-karpenter-live.sh: $src is not a checkout of kubernetes-sigs/karpenter (no go.mod of module sigs.k8s.io/karpenter)" >&2
  exit 1
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/karpenter"
tar -C "$src" --exclude=.git -cf - . | tar -C "$scratch/karpenter" -xf -
echo "building Karpenter's kwok provider ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')) in $scratch" >&2
(cd "$scratch/karpenter" && CGO_ENABLED=0 go build -o "$scratch/karpenter-kwok" ./kwok)
(cd "$root" && make build)

pattern=$(echo "$sizes" | tr ' ' '|')
cd "$root"
KARPENTER_KWOK_BIN="$scratch/karpenter-kwok" KARPENTER_CRDS="$scratch/karpenter/kwok/charts/crds" STEVEDORE_BIN="$root/bin/scheduler" \
  go test -count=1 -run '^$' -bench "^BenchmarkBesideKarpenterLive($pattern)\$" -benchtime 1x -timeout 600m ./test/bench/ |
  grep -E '^(Benchmark|ok|FAIL|---|    )'
