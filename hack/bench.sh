#!/usr/bin/env bash
# Reproduces the benchmark figures of the README: the solver on Karpenter's scheduling benchmark input (100, 1000
# and 5000 pods: pods/s and cost against the fractional lower bound, with first-fit-decreasing for comparison), then
# 1000 mixed pods provisioned in the sandbox (wall time until all are bound), then consolidation from 1000 pods
# down to 700 in the sandbox (time until the fleet's cost stops falling, cost against the lower bound).
# BENCH_INPUT points at the benchmark input (default ../shared/bench/karpenter-400).
set -euo pipefail
cd "$(dirname "$0")/.."
input=${BENCH_INPUT:-../shared/bench/karpenter-400}
if [[ ! -f "$input/convert.py" ]]; then
  echo "benchmark input not found at $input (set BENCH_INPUT)" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$input/convert.py" "$dir" >/dev/null
cp "$input/bounds_summary.json" "$dir/"
echo "== solver on $input (go test -bench BenchmarkPlan)"
STEVEDORE_BENCH_DIR=$dir go test -run '^$' -bench 'BenchmarkPlan(100|1000|5000)$' -benchtime "${BENCH_TIME:-3x}" ./pkg/provision/
echo "== 1000 pending pods in the sandbox, --launch-delay 0"
go test -count=1 -v -run TestAThousandPendingPodsAreAllBound ./test/integration/scale/ 2>&1 | grep -E 'scale_test.go|^(ok|FAIL|--- )'
echo "== interruption messages handled per second (SQS wire protocol to the emulator)"
go test -run '^$' -bench BenchmarkPollMessages -benchtime 5000x ./pkg/interruption/ 2>/dev/null | grep -E 'messages/s|^(ok|FAIL)'
echo "== consolidation 1000 -> 700 pods in the sandbox, default plugin arguments (takes several minutes)"
go test -count=1 -run '^$' -bench BenchmarkConsolidation1000To700 -benchtime 1x -timeout 90m ./test/bench/ 2>&1 |
  grep -E 'consolidation_test.go|^Benchmark|^(ok|FAIL|--- )'
