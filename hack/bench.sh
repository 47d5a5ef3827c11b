#!/usr/bin/env bash
# Runs every benchmark and writes docs/benchmarks-raw.md (figures, machine, commit, commands):
#  - the solver on Karpenter's scheduling benchmark input (100, 1000, 5000, 20000, 50000 pods: pods/s, allocations
#    per pod, peak RSS, cost against the fractional lower bound, first-fit-decreasing for comparison, and whether
#    repeated solves gave identical plans), the greedy packing alone and then with the improvement phase as
#    `scheduler plan` runs by default;
#  - with KARPENTER_SRC set to a checkout of kubernetes-sigs/karpenter: Karpenter's own scheduling benchmark beside
#    the solver's, alternating runs in this sitting (hack/bench-karpenter.sh), and the live path beside Karpenter's
#    kwok provider and kube-scheduler in the same sandbox (hack/bench-karpenter-live.sh); without it, the report
#    says so;
#  - the hourly bill with Savings Plans and Reserved Instances, planned at list price and with them;
#  - interruption messages handled per second;
#  - the consolidation policies over an in-memory cluster: pods evicted and cost saved by WhenEmptyOrUnderutilized
#    and Balanced on a scale-in and on a drift of pod sizes; consolidation passes at 1,000 nodes and 20,000 pods;
#  - in the sandbox with --launch-delay 0: scale-out of 1000, 5000 and 20000 pods through the real scheduler binary,
#    the plugins' overhead on pods that fit existing nodes, consolidation from 1000 to 700 pods (with and without
#    pod-deletion-cost steering), a burst's time to bind with and without a capacity buffer, churn (20 scale
#    changes), and 100 single-replica Deployments moved by Evict and by Surge (consolidation and drift);
#  - gangs in the sandbox: a 64-pod GPU gang's time to bind (nodes instant, after 2 s, after 30 s) beside the same
#    pods without a PodGroup, and EC2 room for 3 of a gang's 4 nodes: what was billed in a minute, with and without;
#  - the soak: SOAK_BURSTS (default 200) randomized bursts, the slowest wait for a ready node (make soak).
# The solver's input is Karpenter's scheduling benchmark, in pkg/solver/testdata/karpenter-bench. BENCH_OUT is the
# report (docs/benchmarks-raw.md); make figures redraws docs/figures from it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-docs/benchmarks-raw.md}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
make build >/dev/null
raw="$dir/raw.txt"
: >"$raw"

run() { # title, command...
  local title=$1
  shift
  echo "== $title" | tee -a "$raw"
  echo "\$ $*" >>"$raw"
  # go test can fold the sandboxes' logs into its output, even inside a benchmark's result line: keep the
  # benchmark lines, result lines and the benchmarks' notes; a failing benchmark does not stop the others
  "$@" 2>/dev/null | grep -E --line-buffered '^(Benchmark|[[:space:]]+[0-9]+[[:space:]]+[0-9.e+]+ ns/op|    [a-z_]+_test\.go:[0-9]+: |--- FAIL|FAIL|ok )' |
    tee -a "$raw" || true
}

# each size in its own process, so that peak-RSS-MiB is that size's; at least two solves per size, so that
# identical-plans (1: every solve gave the same plan) means something; the greedy packing alone (solveTimeout 0,
# as the Karpenter comparison is measured; STEVEDORE_BENCH_BUDGET=2s adds the live path's improvement phase)
for n in ${BENCH_SIZES:-100 1000 5000 20000 50000}; do
  times=${BENCH_TIME:-3x}
  if ((n >= 20000)); then times=2x; fi
  run "solver on Karpenter's benchmark input, $n pods" go test -run '^$' \
    -bench "BenchmarkPlan$n\$" -benchtime "$times" -benchmem -timeout 120m ./pkg/solver/
done
# the same input planned as `scheduler plan` runs by default: the improvement phase bounded by its count of moves,
# --solve-timeout 1m only a safety stop (timed-out-solves 0: it never stopped one); two solves per size, so that
# identical-plans 1 shows the plan does not depend on the clock
for n in ${BENCH_PLAN_SIZES:-1000 5000 20000 50000}; do
  run "solver with the improvement phase (scheduler plan's defaults), $n pods" env STEVEDORE_BENCH_BUDGET=1m go test -run '^$' \
    -bench "BenchmarkPlan$n\$" -benchtime 2x -benchmem -timeout 120m ./pkg/solver/
done
# Karpenter's own benchmark beside the solver's, alternating, when a Karpenter checkout is given
if [[ -n "${KARPENTER_SRC:-}" ]]; then
  run "the solver beside Karpenter's BenchmarkScheduling, alternating runs in this sitting (checkout $KARPENTER_SRC)" \
    hack/bench-karpenter.sh "$KARPENTER_SRC"
  run "live beside Karpenter's kwok provider and kube-scheduler, same sandbox, alternating runs in this sitting (checkout $KARPENTER_SRC)" \
    hack/bench-karpenter-live.sh "$KARPENTER_SRC"
else
  echo "== the solver and the live path beside Karpenter: not run (set KARPENTER_SRC to a checkout of kubernetes-sigs/karpenter); the figures above are Stevedore's alone" |
    tee -a "$raw"
fi
# the hourly bill with Savings Plans and Reserved Instances: planned at list price against planned with them
run "commitments: the bill, planned at list price and with the commitments" go test -run '^$' -bench BenchmarkCommitmentBill \
  -benchtime 1x ./pkg/solver/
# the hourly bill with a 20% on-demand floor on every workload, without one, and all on-demand
run "on-demand floor: the bill and the largest spot pool's pods, with and without a 20% floor" go test -run '^$' \
  -bench BenchmarkOnDemandFloorBill -benchtime 1x ./pkg/solver/
# the bill with a cap per Spot pool on every workload, and the most pods of one workload a storm in one pool takes
run "cap per Spot pool: the bill and the most pods of one workload in one spot pool, caps of 20 and 10 and none" go test -run '^$' \
  -bench BenchmarkSpotPoolCapBill -benchtime 1x ./pkg/solver/
# where the mix goes five minutes after a storm in its largest spot pool, with and without the interruption history
run "interruption history: the pods a stormed spot pool takes when the mix is planned again, with and without it" go test -run '^$' \
  -bench BenchmarkSpotRiskPremium -benchtime 1x ./pkg/solver/
run "interruption messages (SQS wire protocol to the emulator)" go test -run '^$' -bench BenchmarkPollMessages \
  -benchtime 5000x ./pkg/interruption/
# the scale-out and the overhead run the scheduler as the image builds it (-tags nosandbox: no sandbox in the binary)
CGO_ENABLED=0 go build -trimpath -tags nosandbox -o "$dir/scheduler" ./cmd/scheduler
run "scale-out through the real scheduler binary (the image's build), sandbox --launch-delay 0" env STEVEDORE_BIN="$dir/scheduler" \
  go test -count=1 -run '^$' -bench 'BenchmarkScaleOut(1000|5000|20000)$' -benchtime 1x -timeout 120m ./test/bench/
run "plugin overhead: plain pods on existing nodes, with and without Stevedore's plugins" env STEVEDORE_BIN="$dir/scheduler" \
  go test -count=1 -run '^$' -bench BenchmarkPluginOverhead -benchtime 1x -timeout 30m ./test/bench/
run "consolidation 1000 -> 700 pods, with pod-deletion-cost steering (default) and without" go test -count=1 -run '^$' \
  -bench BenchmarkConsolidation1000To700 -benchtime 1x -timeout 90m ./test/bench/
run "consolidation policies in memory: evictions and cost of WhenEmptyOrUnderutilized and Balanced (scale-in 1000 -> 700, drift of pod sizes)" \
  go test -count=1 -run '^$' -bench BenchmarkConsolidationPolicies -benchtime 1x -timeout 30m ./pkg/disruption/
run "consolidation at 1,000 nodes / 20,000 pods in memory: the first pass, and passes to the fixed point" \
  go test -count=1 -run '^$' -bench BenchmarkConsolidationPassAt1000Nodes -benchtime 1x -timeout 60m ./pkg/disruption/
run "moves of 100 single-replica Deployments (readiness 1-10 s), Evict against Surge, on consolidation of 40 nodes and on drift" \
  go test -count=1 -run '^$' -bench BenchmarkMovesOfSingleReplicaDeployments -benchtime 1x -timeout 120m ./test/bench/
run "burst of 20 pods, nodes 30 s to come up, with a CapacityBuffer of 20 chunks and without" go test -count=1 -run '^$' \
  -bench BenchmarkBurstTimeToBind -benchtime 1x -timeout 30m ./test/bench/
run "gangs: 64 GPU workers as a PodGroup and as plain pods, time to bind; EC2 room for 3 of 4 nodes, what was billed in a minute" \
  go test -count=1 -run '^$' -bench 'BenchmarkGang(TimeToBind|ThreeOfFour)' -benchtime 1x -timeout 60m ./test/bench/
run "churn: 20 scale changes, default plugin arguments" go test -count=1 -run '^$' -bench BenchmarkChurn20 \
  -benchtime 1x -timeout 60m ./test/bench/
run "soak: ${SOAK_BURSTS:-200} randomized bursts, the slowest wait after a pod's node was ready (make soak)" \
  env STEVEDORE_BURSTS="${SOAK_BURSTS:-200}" go test -count=1 -timeout 600m -v \
  -run TestRandomBurstsBindAsSoonAsTheirNodesAreReady ./test/integration/bursts/

hack/benchdoc.sh "$raw" "$out"
make --no-print-directory figures
