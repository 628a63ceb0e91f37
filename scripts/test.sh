#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's test command: installs what is missing, builds and tests SegOps.
#   1. Debian packages (cmake, g++, GoogleTest) if absent;
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
  # Unoptimised (host -O0, ptxas -O0): this build only proves that everything compiles and links
  # for the device, ~30% faster; perf_tests/run_h200.sh makes the optimised build that runs on a GPU.
  cmake -S "$root" -B "$build/cuda" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O0 -Xptxas -O0" \
    -DKokkos_ROOT="$cuda_kokkos" -DCMAKE_CXX_COMPILER="$cuda_kokkos/bin/nvcc_wrapper" \
    -DSegOps_ENABLE_INSTALL_TEST=OFF >/dev/null
  # the CUDA unit tests and the device benchmark (headers alone are checked by the host build;
  # Serial is tested there too, so its executable is not rebuilt with nvcc)
  cmake --build "$build/cuda" -j "$jobs" --target segops_unit_tests_cuda bench_device
  echo "CUDA build OK: segops_unit_tests_cuda and bench_device compile and link"
fi

step "Serial unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S "$root" -B "$build/sanitize" -DCMAKE_BUILD_TYPE=None -DKokkos_ROOT="$host_kokkos" \
  -DCMAKE_CXX_FLAGS="-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
  -DSegOps_ENABLE_PERF_TESTS=OFF -DSegOps_ENABLE_INSTALL_TEST=OFF -DSegOps_SERIAL_TEST_SHARDS="$jobs" >/dev/null
cmake --build "$build/sanitize" -j "$jobs" --target segops_unit_tests_serial
# one GoogleTest shard per core (unit_serial_0, unit_serial_1, ...), run side by side
(cd "$build/sanitize" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest -R '^unit_serial' -j "$jobs" --output-on-failure)

step "host build and test suite"
# The Serial unit tests just ran under the sanitizers; here the OpenMP executable (run with 1 and 2
# threads) tests the optimised kernels. With your own Kokkos (Kokkos_ROOT) every backend is built.
skip=SERIAL
[ -n "${Kokkos_ROOT:-}" ] && skip=
cmake -S "$root" -B "$build/host" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$host_kokkos" \
  -DSegOps_SKIP_TEST_BACKENDS="$skip" >/dev/null
cmake --build "$build/host" -j "$jobs"
cd "$build/host"
step "ctest (host)"
ctest --output-on-failure -j "$jobs"  # the 2-thread tests take two slots (PROCESSORS 2)
