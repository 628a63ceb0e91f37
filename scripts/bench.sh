#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main-job command: CPU benchmark of SegOps against its peers, in one run on this machine.
#   scripts/bench.sh [--full] [--no-python] [extra bench_segops options...]
# Installs what is missing (Debian packages, Kokkos, the Python peers' venv), builds perf_tests in
# build-bench/ (Release), runs the quick suite (or --full), and writes results/bench.csv,
# results/notes.txt and results/<family>.png, then prints the summary table.
# Environment: Kokkos_ROOT (use your Kokkos, nothing downloaded), SEGOPS_CACHE (default
# ~/.cache/segops), SEGOPS_JOBS (build jobs, default 2), SEGOPS_THREADS (default: all cores),
# SEGOPS_BENCH_SKIP (op families left out of the C++ build, e.g. "MATVEC"), SEGOPS_BENCH_CXXFLAGS
# (extra compiler flags for the C++ suite, SegOps and its C++ peers alike, e.g. "-march=native" as
# a Kokkos build for this CPU adds; default none: the compiler's baseline target).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
full=0 python=1 extra=()
for a in "$@"; do
  case "$a" in
    --full) full=1 ;;
    --no-python) python=0 ;;
    -h|--help) sed -n 3,10p "$0"; exit 0 ;;
    *) extra+=("$a") ;;
  esac
done
export SEGOPS_CACHE=${SEGOPS_CACHE:-$HOME/.cache/segops}
jobs=${SEGOPS_JOBS:-2}
threads=${SEGOPS_THREADS:-$(nproc)}
start=$(date +%s)
say() { echo "[bench] $(( $(date +%s) - start ))s: $*" >&2; }

# ---- tools from Debian (only what is absent)
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v ninja >/dev/null || need+=(ninja-build)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# ---- Kokkos (yours via Kokkos_ROOT, else the cached checksum-verified 5.0.2 Serial+OpenMP build)
if [ -z "${Kokkos_ROOT:-}" ]; then
  say "provisioning Kokkos (cached after the first time)"
  Kokkos_ROOT=$(SEGOPS_JOBS=$jobs bash scripts/provision_kokkos.sh host | tail -n 1)
fi
say "Kokkos at $Kokkos_ROOT"

# ---- build
say "building perf_tests in build-bench/ (Release, -j$jobs)"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
[ -f build-bench/CMakeCache.txt ] && gen=()
cmake -S . -B build-bench "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$Kokkos_ROOT" \
  -DSegOps_ENABLE_TESTS=OFF -DSegOps_ENABLE_INSTALL_TEST=OFF -DSegOps_ENABLE_PERF_TESTS=ON \
  -DSEGOPS_BENCH_SKIP="${SEGOPS_BENCH_SKIP:-}" -DCMAKE_CXX_FLAGS="${SEGOPS_BENCH_CXXFLAGS:-}" \
  >build-bench.log 2>&1 ||
  { tail -n 30 build-bench.log >&2; exit 4; }
cmake --build build-bench -j "$jobs" --target bench_segops >>build-bench.log 2>&1 ||
  { grep -E "error|Error" build-bench.log | head -n 30 >&2; exit 4; }
rm -f build-bench.log

# ---- Python peers' environment (created once, pinned; a failure only makes peers missing)
py=""
if [ $python = 1 ]; then
  say "preparing the Python peers' venv"
  py=$(bash scripts/bench_env.sh | tail -n 1) || py=""
fi

# ---- run
mkdir -p results
mode=(); [ $full = 1 ] && mode=(--full)
# Per measurement, at least `runs` timed samples and `min_time` seconds of calls, for the C++ suite
# and the Python peers alike: the quick suite's calls of 17 ms or more (N = 2^25, the slow peers)
# take 3, for its 5-minute budget (the rows of the copy-bandwidth targets keep 5:
# bench_harness.hpp, time_median_paired).
if [ $full = 1 ]; then runs=5 min_time=0.2; else runs=3 min_time=0.05; fi
say "running the C++ suite ($([ $full = 1 ] && echo full || echo quick), $threads threads)"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads} OMP_NUM_THREADS=$threads
cpp_rc=0
./build-bench/perf_tests/bench_segops "${mode[@]}" --min-time "$min_time" --min-runs "$runs" --csv results/bench_cpp.csv --notes results/notes_cpp.txt \
  --kokkos-num-threads="$threads" "${extra[@]}" || cpp_rc=$?
[ -s results/bench_cpp.csv ] || { say "the C++ suite wrote no results (exit $cpp_rc)"; exit 5; }
: >results/notes_py.txt
if [ -n "$py" ] && [ -x "$py" ]; then
  say "running the Python peers"
  unset OMP_PROC_BIND OMP_PLACES
  "$py" perf_tests/peers.py "${mode[@]}" --cpp-csv results/bench_cpp.csv --csv results/bench_py.csv \
    --segops-bin ./build-bench/perf_tests/bench_segops \
    --notes results/notes_py.txt --threads "$threads" --min-time "$min_time" \
    --min-runs "$runs" ||
    echo "missing: Python peers (peers.py exited with an error; see above)" >>results/notes_py.txt
else
  echo "missing: Python peers (no venv: python3-venv/pip failed or --no-python)" >>results/notes_py.txt
fi

# ---- merge, summary, plots
{ cat results/bench_cpp.csv; [ -s results/bench_py.csv ] && tail -n +2 results/bench_py.csv; } >results/bench.csv
{
  echo "build: bench_segops with CMAKE_CXX_FLAGS='${SEGOPS_BENCH_CXXFLAGS:-}' (Release: -O3 -DNDEBUG)"
  cat results/notes_cpp.txt results/notes_py.txt
} >results/notes.txt
rm -f results/bench_cpp.csv results/bench_py.csv results/notes_cpp.txt results/notes_py.txt
say "done: results/bench.csv ($(($(wc -l <results/bench.csv) - 1)) rows)"
report_py=$py; [ -n "$report_py" ] && [ -x "$report_py" ] || report_py=python3
"$report_py" perf_tests/report.py --csv results/bench.csv --notes results/notes.txt --plots results
echo "wall time: $(( $(date +%s) - start )) s"
[ $cpp_rc = 0 ] || say "bench_segops exited with $cpp_rc (wrong results are listed above)"
exit $cpp_rc
