#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz (built by `make fuzz` into BUILD) for SECONDS each, on a
# working copy of its corpus (BUILD/corpus/<harness>, which keeps what it finds between runs) plus the
# committed seeds (tests/fuzz/corpus/<harness>). Prints the executions per harness; exits non-zero on any
# finding (crash, sanitizer report, leak, timeout, broken invariant), whose input lands in BUILD/findings/.
# Usage: tests/fuzz/run.sh BUILD [SECONDS]
set -euo pipefail
build=$1
seconds=${2:-60}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/findings"
passed=0
failed=0
for harness in "$src"/fuzz_*.c; do
  name=$(basename "$harness" .c)
  mkdir -p "$build/corpus/$name"
  log="$build/$name.log"
  if "$build/$name" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$build/findings/$name-" "$build/corpus/$name" "$src/corpus/$name" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "$name: ${execs:-?} executions in $seconds s, no finding"
    passed=$((passed + 1))
  else
    echo "$name: FINDING (log: $log, input: $build/findings/)"
    tail -n 30 "$log"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
