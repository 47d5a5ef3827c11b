#!/usr/bin/env bash
# benchdoc.sh RAW OUT: writes the benchmark report OUT (markdown) from RAW, the output hack/bench.sh collected.
set -euo pipefail
raw=$1
out=$2
# the report itself is about to change: it does not make the tree dirty
dirty=$(git diff --quiet -- . ":(exclude)$out" || echo ' (with local changes)')
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (hack/bench.sh) on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD)$dirty."
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(go version | cut -d' ' -f3)."
  echo
  echo "| benchmark | figure | value |"
  echo "|---|---|---|"
  # a result line is "BenchmarkName-N <iterations> <value> <unit> ..."; logs may have cut it after the name
  awk '
    /^Benchmark[A-Za-z0-9]+(\/[A-Za-z0-9_.-]+)*-[0-9]+/ { name = $1; sub(/-[0-9]+$/, "", name); if (NF >= 4 && $2 ~ /^[0-9]+$/) { row(3) } else { pending = name }; next }
    /^[[:space:]]+[0-9]+[[:space:]]+[0-9.e+]+ ns\/op/ && pending != "" { name = pending; pending = ""; row(2) }
    function row(first,   i) { for (i = first; i < NF; i += 2) printf "| %s | %s | %s |\n", name, $(i+1), $i }
  ' "$raw"
  echo
  echo "What each benchmark said, and the commands:"
  echo
  echo '```'
  grep -E '^(== |\$ |    [a-z_]+_test\.go:[0-9]+: |--- FAIL|FAIL)' "$raw" | sed 's/^ *//'
  echo '```'
} >"$out"
echo "wrote $out"
