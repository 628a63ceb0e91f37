#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's test command: installs what is missing, builds and tests SegOps.
#   1. Debian packages (cmake, g++, GoogleTest; ccache where it installs) if absent;
#   2. Kokkos 5.0.2 (Serial+OpenMP) from the cache, or fetched and built once (scripts/provision_kokkos.sh),
#      unless Kokkos_ROOT points at your own Kokkos (then nothing is downloaded);
#   3. CUDA compile-and-link check against a Kokkos CUDA build (Kokkos_ARCH_HOPPER90) when nvcc exists;
#   4. Serial unit tests under AddressSanitizer + UndefinedBehaviorSanitizer;
#   5. the host build (OpenMP unit tests, benchmarks, install and consumer tests) and its ctest
#      suite, whose summary line ends the output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SEGOPS_BUILD_DIR:-$root/build}
jobs=${SEGOPS_JOBS:-$(nproc)}
start=$SECONDS
step() { echo; echo "=== segops test [$((SECONDS - start)) s]: $*"; }

step "checking Debian packages"
need=()
for pkg in cmake g++ make libgtest-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

# ccache, where it installs: the builds below (CUDA check, sanitizers, optimised) then reuse the
# objects that an earlier run compiled from the same sources with the same flags, kept in
# ~/.cache/segops/ccache (SEGOPS_CACHE moves it). Paths below the checkout are hashed relative to
# it, so another clone hits too. Without ccache, or with its cache gone, they compile everything.
# SEGOPS_CCACHE=0 turns it off.
launcher=()
if [ "${SEGOPS_CCACHE:-1}" = 1 ]; then
  if ! command -v ccache >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq ccache >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq ccache >/dev/null 2>&1; } ||
      echo "ccache could not be installed; building without it"
  fi
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_DIR=${CCACHE_DIR:-${SEGOPS_CACHE:-$HOME/.cache/segops}/ccache} CCACHE_BASEDIR=$root \
      CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-4G}
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    ccache --zero-stats >/dev/null
  fi
fi

step "Kokkos (Serial + OpenMP)"
if [ -n "${Kokkos_ROOT:-}" ]; then
  host_kokkos=$Kokkos_ROOT
  echo "using your Kokkos at $host_kokkos (nothing is downloaded)"
else
  host_kokkos=$(bash "$root/scripts/provision_kokkos.sh" host | tail -n 1)
fi

if [ "${SEGOPS_SKIP_CUDA:-0}" = 1 ]; then
  step "CUDA build check SKIPPED: SEGOPS_SKIP_CUDA=1"
elif ! command -v nvcc >/dev/null 2>&1; then
  step "CUDA build check SKIPPED: nvcc is not installed on this machine"
elif [ -n "${Kokkos_ROOT:-}" ] && [ -z "${SEGOPS_KOKKOS_CUDA_ROOT:-}" ]; then
  step "CUDA build check SKIPPED: Kokkos_ROOT given without SEGOPS_KOKKOS_CUDA_ROOT (a Kokkos CUDA build)"
else
  step "CUDA build check (compile and link only; no GPU here)"
  cuda_kokkos=${SEGOPS_KOKKOS_CUDA_ROOT:-$(bash "$root/scripts/provision_kokkos.sh" cuda | tail -n 1)}
  # This build only proves that everything compiles and links for the device; it cannot run here.
  # So it is unoptimised (host -O0, ptxas -O0), and the unit tests call the library with one type
  # combination (SegOps_TEST_TYPE_SUBSET: float elements into double, LayoutRight), which still
  # instantiates every op and order for the device (test_matvec.cpp: 146 -> 122 s).
  # perf_tests/run_h200.sh makes the optimised build of every type that runs on a GPU. ccache, in
  # depend mode (the include list from nvcc's -MD file, every byte of every header hashed; nothing is
  # preprocessed), keeps the objects for the next run of the same sources.
  cmake -S "$root" -B "$build/cuda" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O0 -Xptxas -O0" \
    -DKokkos_ROOT="$cuda_kokkos" -DCMAKE_CXX_COMPILER="$cuda_kokkos/bin/nvcc_wrapper" \
    -DSegOps_ENABLE_INSTALL_TEST=OFF -DSegOps_TEST_TYPE_SUBSET=ON ${launcher[@]+"${launcher[@]}"} >/dev/null
  # the CUDA unit tests and the device benchmark (headers alone are checked by the host build;
  # Serial is tested there too, so its executable is not rebuilt with nvcc)
  CCACHE_DEPEND=1 cmake --build "$build/cuda" -j "$jobs" --target segops_unit_tests_cuda bench_device
  echo "CUDA build OK: segops_unit_tests_cuda (type subset) and bench_device compile and link"
fi

step "Serial unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# UBSan without the checks AddressSanitizer covers (null, object-size), those of code SegOps does not
# have (vptr; nonnull attributes) and alignment (the host kernels load vectors through memcpy) and
# pointer-overflow: 38% less compile time than all of -fsanitize=undefined (test_matvec.cpp at -O1:
# 136 s, all of it 218 s). Signed overflow, shifts, bounds, unreachable and the rest stay.
ubsan_off=null,alignment,object-size,vptr,pointer-overflow,nonnull-attribute,returns-nonnull-attribute
# SEGOPS_NO_WIDE_DISPATCH: the masked runs of single values keep their 16-byte vectors here; the host
# build below takes their 32-byte clone where this CPU has AVX2 (host_vectors.hpp), so both are tested.
cmake -S "$root" -B "$build/sanitize" -DCMAKE_BUILD_TYPE=None -DKokkos_ROOT="$host_kokkos" \
  -DCMAKE_CXX_FLAGS="-O1 -DSEGOPS_NO_WIDE_DISPATCH -fsanitize=address,undefined -fno-sanitize=$ubsan_off -fno-sanitize-recover=all -fno-omit-frame-pointer" \
  -DSegOps_ENABLE_PERF_TESTS=OFF -DSegOps_ENABLE_INSTALL_TEST=OFF -DSegOps_SERIAL_TEST_SHARDS="$jobs" \
  ${launcher[@]+"${launcher[@]}"} >/dev/null
cmake --build "$build/sanitize" -j "$jobs" --target segops_unit_tests_serial
# one GoogleTest shard per core (unit_serial_0, unit_serial_1, ...), run side by side
(cd "$build/sanitize" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest -R '^unit_serial' -j "$jobs" --output-on-failure)

step "host build and test suite"
# The Serial unit tests just ran under the sanitizers; here the OpenMP executable (run with 1 and 2
# threads) tests the optimised kernels. With your own Kokkos (Kokkos_ROOT) every backend is built.
# SEGOPS_NO_FLATTEN, as in the unit tests, halves the benchmark's compile time (bench_ops_scaled.cpp:
# 643 -> 304 s); bench_check then checks the kernels with the compiler's own inlining. The main job
# (scripts/bench.sh) builds them flattened, as users get them, and checks every result before it
# times it; the consumer tests below build the README example flattened.
skip=SERIAL
[ -n "${Kokkos_ROOT:-}" ] && skip=
cmake -S "$root" -B "$build/host" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$host_kokkos" \
  -DCMAKE_CXX_FLAGS=-DSEGOPS_NO_FLATTEN -DSegOps_SKIP_TEST_BACKENDS="$skip" \
  ${launcher[@]+"${launcher[@]}"} >/dev/null
cmake --build "$build/host" -j "$jobs"
if [ ${#launcher[@]} -gt 0 ]; then
  ccache --print-stats 2>/dev/null | awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {
    printf "%s%s %s", sep, $1, $2; sep = ", " } END { if (sep) print " (ccache, all builds)" }'
fi
cd "$build/host"
step "ctest (host)"
ctest --output-on-failure -j "$jobs"  # the 2-thread tests take two slots (PROCESSORS 2)
