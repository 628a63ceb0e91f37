#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Create (once) and reuse the Python environment of the benchmark's Python peers.
# Usage: bench_env.sh  -> prints the venv's python on the last line of stdout.
# PyTorch comes from Debian's python3-torch (CPU only, small) installed with apt and seen through
# --system-site-packages; everything else is pinned in perf_tests/requirements-bench.txt.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
req=$here/perf_tests/requirements-bench.txt
cache=${SEGOPS_CACHE:-$HOME/.cache/segops}
venv=$cache/bench-venv
log() { echo "[bench_env] $*" >&2; }

# The venv must be built on the system interpreter: only it sees Debian's dist-packages (torch).
py=/usr/bin/python3
apt_missing=()
[ -x "$py" ] || apt_missing+=(python3)
"$py" -c 'import ensurepip, venv' 2>/dev/null || apt_missing+=(python3-venv)
dpkg -s python3-torch >/dev/null 2>&1 || apt_missing+=(python3-torch)
if [ ${#apt_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing with apt-get: ${apt_missing[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${apt_missing[@]}"; } >&2 || log "WARNING: apt-get install ${apt_missing[*]} failed (the peers needing it are reported missing)"
  else
    log "WARNING: missing Debian packages ${apt_missing[*]} and not root: install them to get every peer"
  fi
fi
[ -x "$py" ] || { log "ERROR: no $py"; exit 3; }

stamp=$(sha256sum "$req" | cut -c1-16)
if [ -f "$venv/.segops-$stamp" ]; then
  log "reusing $venv"
  echo "$venv/bin/python"; exit 0
fi
log "creating $venv (pinned peers; first time only, a few minutes)"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv" >&2 || { log "ERROR: python3 -m venv failed"; exit 3; }
# One package at a time, so one that fails to install leaves the others (it is reported missing).
"$venv/bin/python" -m pip install -q --upgrade pip >&2 || true
failed=0
pins=$(grep -Ev '^\s*(#|$)' "$req")
if ! "$venv/bin/python" -m pip install -q --progress-bar off $pins >&2; then
  log "WARNING: installing all pins at once failed; trying one by one"
  for p in $pins; do
    "$venv/bin/python" -m pip install -q --progress-bar off "$p" -c "$req" >&2 || { log "WARNING: could not install $p"; failed=1; }
  done
fi
[ $failed = 0 ] && touch "$venv/.segops-$stamp"
echo "$venv/bin/python"
