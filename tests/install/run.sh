#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a C host with pkg-config against it, and runs the
# Node.js host test (koffi) on the installed library. Args: BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
build=$1 src=$2 shared=$3
prefix=$(mktemp -d /tmp/eli-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1)
export PKG_CONFIG_PATH="${libdir}pkgconfig"
model="$shared/golden/models/e2b-mini-f32.gguf"
[ -f "$prefix/share/elizainference/models/eliza-1-nano/text/eliza-1-nano.gguf" ] &&
  model="$prefix/share/elizainference/models/eliza-1-nano/text/eliza-1-nano.gguf"

# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -o "$prefix/consumer" "$src/tests/install/consumer.c" \
  $(pkg-config --cflags --libs elizainference) -Wl,-rpath,"$libdir"
"$prefix/consumer" "$model"
echo "pkg-config consumer: ok"

if [ ! -d "$src/tests/node/node_modules/koffi" ]; then
  echo "koffi is not installed: run 'npm ci --prefix tests/node' (make deps does it)" >&2
  exit 1
fi
ELI_LIB="${libdir}libelizainference.so" ELI_CLI="$prefix/bin/eliza-infer" ELI_MODEL="$model" \
  node --test "$src/tests/node/host.test.mjs"
