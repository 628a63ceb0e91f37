#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetch (checksum-verified, from the Debian archive apt is configured with), build and cache Kokkos 5.0.2.
# Usage: provision_kokkos.sh host|cuda   -> prints the install prefix on the last line of stdout.
set -euo pipefail
flavour=${1:?usage: provision_kokkos.sh host|cuda}
version=5.0.2
sha256=188817bb452ca805ee8701f1c5adbbb4fb83dc8d1c50624566a18a719ba0fa5e
cache=${SEGOPS_CACHE:-$HOME/.cache/segops}
src_root=$cache/kokkos-$version
prefix=$cache/kokkos-$version-$flavour
jobs=${SEGOPS_JOBS:-$(nproc)}
log() { echo "[provision_kokkos] $*" >&2; }

if [ -f "$prefix/.segops-complete" ]; then
  log "reusing cached Kokkos $version ($flavour) at $prefix"
  echo "$prefix"; exit 0
fi
mkdir -p "$cache"

archive=$cache/kokkos_$version.orig.tar.gz
if ! echo "$sha256  $archive" | sha256sum -c --status 2>/dev/null; then
  # The archive's base URI comes from apt's own configuration: the main archive of the system's codename.
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  base=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
         awk -v c="$codename" '$2 == c { print $1; exit }')
  if [ -z "$base" ]; then
    log "ERROR: could not find the Debian archive for release '$codename' in apt's configuration."
    log "Supply Kokkos >= 5.0 yourself: build and install it, then run again with Kokkos_ROOT=/its/prefix."
    exit 3
  fi
  url=${base%/}/pool/main/k/kokkos/kokkos_$version.orig.tar.gz
  log "downloading Kokkos $version source from the configured Debian archive"
  rm -f "$archive.part"
  if ! /usr/lib/apt/apt-helper download-file "$url" "$archive.part" "SHA256:$sha256" >&2; then
    rm -f "$archive.part"
    log "ERROR: download or checksum check of $url failed."
    log "Supply Kokkos >= 5.0 yourself: build and install it, then run again with Kokkos_ROOT=/its/prefix,"
    log "or put kokkos_$version.orig.tar.gz (SHA256 $sha256) into $cache and run again."
    exit 3
  fi
  mv "$archive.part" "$archive"
fi

if [ ! -f "$src_root/CMakeLists.txt" ]; then
  rm -rf "$src_root" "$src_root.tmp" && mkdir -p "$src_root.tmp"
  tar -xzf "$archive" -C "$src_root.tmp" --strip-components=1
  mv "$src_root.tmp" "$src_root"
fi

opts=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DCMAKE_INSTALL_PREFIX="$prefix"
      -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF)
case "$flavour" in
  host) opts+=(-DKokkos_ENABLE_OPENMP=ON -DCMAKE_CXX_COMPILER="${CXX:-g++}") ;;
  cuda) opts+=(-DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON
               -DCMAKE_CXX_COMPILER="$src_root/bin/nvcc_wrapper") ;;
  *) log "unknown flavour '$flavour' (host|cuda)"; exit 2 ;;
esac
build=$cache/build-kokkos-$version-$flavour
rm -rf "$build" "$prefix"
log "configuring and building Kokkos $version ($flavour) with $jobs jobs"
cmake -S "$src_root" -B "$build" "${opts[@]}" >"$build.log" 2>&1 || { tail -n 40 "$build.log" >&2; exit 4; }
cmake --build "$build" -j "$jobs" >>"$build.log" 2>&1 || { tail -n 40 "$build.log" >&2; exit 4; }
cmake --install "$build" >>"$build.log" 2>&1 || { tail -n 40 "$build.log" >&2; exit 4; }
touch "$prefix/.segops-complete"
rm -rf "$build"
log "Kokkos $version ($flavour) installed at $prefix"
echo "$prefix"
