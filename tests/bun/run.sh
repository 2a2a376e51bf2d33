#!/usr/bin/env bash
# The Bun host test (host.test.ts) against a built library. Args: LIBRARY BUNDLE CLI
# Bun comes from the npm registry (tests/bun/package-lock.json, `make deps`); where it is not installed and
# cannot be (no registry), the test is skipped with a message (exit 77, ctest's skip code).
# ELI_PRELOAD (the sanitizer build sets it): a runtime to preload into bun, e.g. libasan.
set -euo pipefail
lib=$1 bundle=$2 cli=$3
here=$(cd "$(dirname "$0")" && pwd)
bun="$here/node_modules/.bin/bun"
if [ ! -x "$bun" ]; then
  if ! npm ci --prefix "$here" --no-audit --no-fund >/dev/null 2>&1 || [ ! -x "$bun" ]; then
    echo "SKIPPED: bun is not installed and the npm registry is unreachable (npm ci --prefix tests/bun)"
    exit 77
  fi
fi
cd "$here"
ELI_LIB=$lib ELI_BUNDLE=$bundle ELI_CLI=$cli LD_PRELOAD="${ELI_PRELOAD:-}" exec "$bun" test --timeout 300000 host.test.ts
