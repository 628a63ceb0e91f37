#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B timing of the working tree's headers against a baseline revision's, in one process:
#   scripts/ab.sh [--double] BASE_REV [--n N] [--l L] [--d D] [--unsorted] [--pairs P] [--ops a,b]
# perf_tests/ab: both versions of the ops compiled into one program (the baseline's include/ from
# `git archive BASE_REV`, its namespace renamed), called alternately on the same data; prints, per
# op, whether the bits agree, both medians and the quartiles of the per-pair ratios work/base
# (below 1: the working tree is faster). Built in build-ab/ (Release flags of the suite, -O3) with
# the cached host Kokkos (scripts/provision_kokkos.sh) or Kokkos_ROOT, plus SEGOPS_AB_CXXFLAGS on
# both sides (e.g. "-mavx2"); runs on SEGOPS_THREADS threads (default: all cores). Exit 1 when some
# op's bits differ.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
flavour=float
if [ "${1:-}" = "--double" ]; then flavour=double; shift; fi
base=${1:?usage: scripts/ab.sh [--double] BASE_REV [ab_compare options]}
shift
rev=$(git rev-parse --verify --short=12 "$base^{commit}")
if [ -z "${Kokkos_ROOT:-}" ]; then
  Kokkos_ROOT=$(bash scripts/provision_kokkos.sh host | tail -n 1)
fi
klib=$Kokkos_ROOT/lib
[ -f "$klib/libkokkoscore.a" ] || klib=$Kokkos_ROOT/lib64
out=build-ab
mkdir -p "$out"
flags=(-O3 -DNDEBUG -fopenmp -std=gnu++20 -isystem "$Kokkos_ROOT/include" -Iperf_tests/ab)
[ $flavour = double ] && flags+=(-DSEGOPS_AB_DOUBLE)
read -r -a extra <<<"${SEGOPS_AB_CXXFLAGS:-}"
flags+=("${extra[@]}")
cxx=${CXX:-g++}
pids=()
# the baseline's headers and its object, kept per revision, flavour and version of the ops file
tag=$rev-$flavour-$( (cat perf_tests/ab/ab_common.hpp perf_tests/ab/ab_ops.cpp; echo "${extra[*]}") | sha1sum | cut -c1-8)
if [ ! -f "$out/base-$tag.o" ]; then
  rm -rf "$out/base-$rev" && mkdir -p "$out/base-$rev"
  git archive "$rev" include | tar -x -C "$out/base-$rev"
  echo "[ab] compiling the ops against $rev's headers" >&2
  "$cxx" "${flags[@]}" -DSEGOPS_AB_BASE -I"$out/base-$rev/include" -c perf_tests/ab/ab_ops.cpp \
    -o "$out/base-$tag.o" &
  pids+=($!)
fi
echo "[ab] compiling the ops against the working tree's headers and the driver" >&2
"$cxx" "${flags[@]}" -Iinclude -c perf_tests/ab/ab_ops.cpp -o "$out/work-$flavour.o" &
pids+=($!)
"$cxx" "${flags[@]}" -c perf_tests/ab/ab_main.cpp -o "$out/main-$flavour.o"
for p in "${pids[@]}"; do wait "$p"; done
"$cxx" -fopenmp "$out/main-$flavour.o" "$out/base-$tag.o" "$out/work-$flavour.o" \
  "$klib/libkokkoscore.a" -ldl -o "$out/ab_compare-$flavour"
threads=${SEGOPS_THREADS:-$(nproc)}
echo "[ab] base $rev vs the working tree ($(git diff --quiet "$rev" -- include && echo "no header change" || echo "headers changed"))" >&2
OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads} OMP_NUM_THREADS=$threads \
  "$out/ab_compare-$flavour" --kokkos-num-threads="$threads" "$@"
