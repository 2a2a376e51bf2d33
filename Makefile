# Thin wrapper over CMake: `make` builds build/libelizainference.{so,a} and build/eliza-infer,
# `make test` builds and runs every test through ctest, `make asan` runs the tests under ASan+UBSan.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CC ?= cc

.PHONY: all deps test asan clang tsan fuzz fuzz-seeds run install clean cross-aarch64
PREFIX ?= /usr/local

all:
	@cmake -S . -B $(BUILD) -DCMAKE_C_COMPILER=$(CC) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The host tests need koffi (Node.js) and bun from the npm registry, pinned by tests/{node,bun}/package-lock.json.
deps:
	@[ -d tests/node/node_modules/koffi ] || npm ci --prefix tests/node --no-audit --no-fund >/dev/null
	@[ -x tests/bun/node_modules/.bin/bun ] || npm ci --prefix tests/bun --no-audit --no-fund >/dev/null || \
	  echo "bun could not be installed from npm: the Bun host test will be skipped"

test: all deps
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan: deps
	@cmake -S . -B build-asan -DELI_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

clang: deps
	@cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang >/dev/null
	@cmake --build build-clang -j $(JOBS)
	cd build-clang && ctest --output-on-failure -j $(JOBS)

# The threaded tests under ThreadSanitizer (tests/tsan.sh names them and says why the others are left out).
tsan:
	tests/tsan.sh build-tsan $(JOBS)

# libFuzzer harnesses (tests/fuzz/fuzz_*.c, clang with ASan + UBSan), each run FUZZ_SECONDS on its corpus;
# any finding fails. fuzz-seeds rewrites the binary seeds of tests/fuzz/corpus.
FUZZ_SECONDS ?= 60
fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DELI_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_all
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

fuzz-seeds:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DELI_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_seeds
	build-fuzz/fuzz_seeds tests/fuzz/corpus

# aarch64 cross build (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) with the kernel tests run under
# qemu-aarch64 (qemu-user) as a Cortex-A53 (plain NEON) and as "max" (NEON + dotprod).
cross-aarch64:
	tests/cross/run-aarch64.sh

install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-clang build-aarch64 build-tsan build-fuzz
