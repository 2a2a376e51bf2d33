#!/usr/bin/env bash
# make tsan: the tests that run threads, built with clang -fsanitize=thread into BUILD, each failing on any
# ThreadSanitizer report (halt_on_error).
#   test_ffi      streams on two threads at once, cancel from another thread, the C ABI's locks
#   test_ffi_hostile  cancel racing close, tokenize racing evict, destroy racing use
#   test_mtp      the drafter and the target on one context's thread pool, verification batches
#   test_models   the forward pass on the pool with 2 threads against 1 (its hand-off and splits)
#   test_slot     streams (on 2-thread pools) saved and restored
#   test_mapguard the SIGBUS guard under a two-thread decode
# Left out: test_kernels (its kernels run on the calling thread only: nothing for TSan to see), the tests
# without threads, test_install and test_cli (other processes: a host, the CLI on a pseudo-terminal).
# Usage: tests/tsan.sh BUILD [JOBS]
set -euo pipefail
build=$1
jobs=${2:-2}
tests=(test_ffi test_ffi_hostile test_mtp test_models test_slot test_mapguard)
src=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DELI_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target "${tests[@]}"
cd "$build"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --output-on-failure -j "$jobs" -R "^($(IFS='|'; echo "${tests[*]}"))\$"
