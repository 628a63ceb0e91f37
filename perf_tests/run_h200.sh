#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one prepared GPU run of SegOps (issue 5).
#   bash perf_tests/run_h200.sh build    # here, on the CPU machine: CUDA Kokkos (HOPPER90), the CUDA
#                                        # unit tests and bench_device into build-h200/, Kokkos into
#                                        # .kokkos-cuda/ (both ignored by git; carry them)
#   bash perf_tests/run_h200.sh run      # on the H200 (device tool, carry build-h200 and .kokkos-cuda):
#                                        # unit tests, compute-sanitizer memcheck, copy bandwidth,
#                                        # benchmark eager + graph, CUB, PyTorch peers; results under
#                                        # $OUT (or results-h200/), short table printed last
#   bash perf_tests/run_h200.sh dry-run  # the run's benchmark steps against the host (OpenMP) build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-run}
out=${OUT:-$root/results-h200}
mkdir -p "$out"
big=${SEGOPS_H200_N:-10000,10000000,134217728}

build_dir() {  # $1 build dir, $2 Kokkos prefix, extra cmake args...
  local dir=$1 kokkos=$2; shift 2
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$kokkos" \
    -DSegOps_ENABLE_INSTALL_TEST=OFF "$@" >/dev/null
}

case "$mode" in
  build)
    kokkos=$(bash scripts/provision_kokkos.sh cuda | tail -n 1)
    rm -rf .kokkos-cuda && cp -r "$kokkos" .kokkos-cuda
    build_dir build-h200 "$root/.kokkos-cuda" -DCMAKE_CXX_COMPILER="$root/.kokkos-cuda/bin/nvcc_wrapper" \
      -DSegOps_RUN_DEVICE_TESTS=ON
    cmake --build build-h200 -j "${SEGOPS_JOBS:-$(nproc)}" --target segops_unit_tests_cuda bench_device
    grep -qxF '/build-h200/' .git/info/exclude 2>/dev/null || printf '/build-h200/\n/.kokkos-cuda/\n' >> .git/info/exclude
    du -sh build-h200 .kokkos-cuda
    ;;
  dry-run)
    kokkos=${Kokkos_ROOT:-$(bash scripts/provision_kokkos.sh host | tail -n 1)}
    build_dir build-dry "$kokkos" -DSegOps_ENABLE_TESTS=OFF
    cmake --build build-dry -j 2 --target bench_device
    build-dry/perf_tests/bench_device --n "${SEGOPS_H200_N:-10000,1000000}" --reps 5 --csv "$out/bench_device.csv" | tee "$out/bench_device.log"
    ;;
  run)
    set +e
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
    tests=build-h200/unit_tests/segops_unit_tests_cuda
    if ! "$tests" --gtest_list_tests >/dev/null 2>&1; then  # binaries from the CPU machine do not start here
      echo "rebuilding on the device (carried binaries did not start)"
      build_dir build-h200 "$root/.kokkos-cuda" -DCMAKE_CXX_COMPILER="$root/.kokkos-cuda/bin/nvcc_wrapper" \
        -DSegOps_RUN_DEVICE_TESTS=ON
      cmake --build build-h200 -j 16 --target segops_unit_tests_cuda bench_device > "$out/rebuild.log" 2>&1
    fi
    "$tests" --gtest_brief=1 > "$out/unit_tests.log" 2>&1; unit_rc=$?
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
      --gtest_filter='Linear*:Bilinear*:Nonlinear*:Matvec*:Graph*' > "$out/memcheck.log" 2>&1; mem_rc=$?
    build-h200/perf_tests/bench_device --n "$big" --reps 30 --csv "$out/bench_device.csv" > "$out/bench_device.log" 2>&1; bench_rc=$?
    copy=$(sed -n 's/^device copy bandwidth: \([0-9.]*\).*/\1/p' "$out/bench_device.log")
    timeout 200 python3 perf_tests/peers_cuda.py --n 10000,10000000 --copy-gbps "${copy:-0}" \
      --csv "$out/peers_cuda.csv" > "$out/peers.log" 2>&1; peers_rc=$?
    python3 - "$out" <<'PY'
import csv, sys, collections
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/bench_device.csv")))
try:
    rows += list(csv.DictReader(open(f"{out}/peers_cuda.csv")))
except FileNotFoundError:
    pass
best = collections.defaultdict(dict)
for r in rows:
    k = (r["op"], r["order"], int(r["N"]), int(r["M"]), int(r["D"]))
    t = float(r["median_s"])
    impl = r["impl"]
    fam = "segops" if impl.startswith("segops") else ("cub" if impl.startswith("cub") else "torch")
    if impl not in best[k] or t < best[k][impl]:
        best[k][impl] = t
print("\nop        ord  N          M          D  eager_us  graph_us  best_torch_us  torch/graph  cub/eager")
for k in sorted(best):
    v = best[k]
    e, g = v.get("segops_eager"), v.get("segops_graph")
    tt = min([t for i, t in v.items() if i.startswith("torch")], default=None)
    c = v.get("cub_segmented_reduce")
    if e is None or k[2] not in (10000, 10000000) and c is None:
        continue
    print(f"{k[0]:9s} {k[1]:4s} {k[2]:<10d} {k[3]:<10d} {k[4]:<2d} {e*1e6:8.1f}  {g*1e6:8.1f}  "
          f"{(tt*1e6 if tt else float('nan')):13.1f}  {(tt/g if tt else float('nan')):11.2f}  "
          f"{(c/e if c else float('nan')):9.2f}")
PY
    tail -n 25 "$out/bench_device.log"
    echo "unit tests rc=$unit_rc ($(tail -n 1 "$out/unit_tests.log")); memcheck rc=$mem_rc ($(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -n 1)); bench rc=$bench_rc; peers rc=$peers_rc"
    ;;
  *) echo "usage: $0 build|run|dry-run" >&2; exit 2 ;;
esac
