#!/usr/bin/env bash
# bench-karpenter.sh SRC: Stevedore's solver beside Karpenter's own scheduling benchmark, on this machine in this
# sitting. SRC is a checkout of kubernetes-sigs/karpenter; it is copied to a scratch folder and its benchmark
# (BenchmarkScheduling<N> of pkg/controllers/provisioning/scheduling, build tag test_performance) built there, so
# nothing of it enters this repository. Each round runs, for each size, Karpenter's benchmark and Stevedore's
# BenchmarkPlan<N> once each, in fresh processes, alternating which goes first; the report gives per size the
# median pods/s of each side, the ratio of the medians and the range of the per-round ratios, as benchmark lines
# (BenchmarkBesideKarpenter<N>) that hack/benchdoc.sh tabulates.
#
# BENCH_KARPENTER_SIZES (default "1000 5000 20000": the sizes both benchmarks have) and BENCH_KARPENTER_ROUNDS
# (default 3) change the work.
set -euo pipefail
src=${1:?usage: bench-karpenter.sh KARPENTER_CHECKOUT}
root=$(cd "$(dirname "$0")/.." && pwd)
sizes=${BENCH_KARPENTER_SIZES:-1000 5000 20000}
rounds=${BENCH_KARPENTER_ROUNDS:-3}
if [[ ! -f "$src/go.mod" ]] || ! grep -q '^module sigs.k8s.io/karpenter$' "$src/go.mod"; then
  echo "bench-karpenter.sh: $src is not a checkout of kubernetes-sigs/karpenter (no go.mod of module sigs.k8s.io/karpenter)" >&2
  exit 1
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/karpenter"
tar -C "$src" --exclude=.git -cf - . | tar -C "$scratch/karpenter" -xf -
pkg=pkg/controllers/provisioning/scheduling
echo "building Karpenter's benchmark ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')) in $scratch" >&2
(cd "$scratch/karpenter" && go test -tags test_performance -c -o "$scratch/karpenter.test" "./$pkg")
(cd "$root" && go test -c -o "$scratch/stevedore.test" ./pkg/solver/)

# one run of one side: prints its pods/s
karpenter() {
  (cd "$scratch/karpenter/$pkg" && "$scratch/karpenter.test" -test.run '^$' -test.bench "^BenchmarkScheduling$1\$" -test.benchtime 1x) |
    awk '/^BenchmarkScheduling/ { for (i = 3; i < NF; i++) if ($(i+1) == "pods/sec") print $i }'
}
stevedore() {
  (cd "$root/pkg/solver" && "$scratch/stevedore.test" -test.run '^$' -test.bench "^BenchmarkPlan$1\$" -test.benchtime 1x) |
    awk '/^BenchmarkPlan/ { for (i = 3; i < NF; i++) if ($(i+1) == "pods/s") print $i }'
}

declare -A ks ss
for ((r = 1; r <= rounds; r++)); do
  for n in $sizes; do
    if ((r % 2)); then
      k=$(karpenter "$n")
      s=$(stevedore "$n")
    else
      s=$(stevedore "$n")
      k=$(karpenter "$n")
    fi
    if [[ -z "$k" || -z "$s" ]]; then
      echo "bench-karpenter.sh: round $r, $n pods: a benchmark gave no figure (Karpenter '$k', Stevedore '$s')" >&2
      exit 1
    fi
    echo "round $r, $n pods: Karpenter $k pods/s, Stevedore $s pods/s" >&2
    ks[$n]+="$k "
    ss[$n]+="$s "
  done
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for n in $sizes; do
  km=$(echo "${ks[$n]}" | median)
  sm=$(echo "${ss[$n]}" | median)
  read -r lo hi < <(paste <(echo "${ks[$n]}" | tr ' ' '\n' | sed '/^$/d') <(echo "${ss[$n]}" | tr ' ' '\n' | sed '/^$/d') |
    awk 'NR == 1 { lo = hi = $2 / $1 } { r = $2 / $1; if (r < lo) lo = r; if (r > hi) hi = r } END { printf "%.2f %.2f\n", lo, hi }')
  echo "BenchmarkBesideKarpenter$n-$(nproc) $rounds $km karpenter-pods/s $sm stevedore-pods/s $(awk -v s="$sm" -v k="$km" 'BEGIN { printf "%.2f", s / k }') speed-up $lo speed-up-min $hi speed-up-max"
done
