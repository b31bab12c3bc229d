#!/usr/bin/env bash
# Debian packages the test suite needs: nats-server (scale-out tests, run with -js), chromium
# (browser tests through playwright-core) and wrk (the HTTP bench's load generator, which
# test/package/bench.test.ts runs at a tiny size). Installs only what is missing, as root or through
# passwordless sudo; silent when everything is there; one line on stderr and exit 1 when it can't.
# Skip with SUBRUN_SKIP_SYSTEM_DEPS=1 (a machine that provides them another way).
set -euo pipefail

[ "${SUBRUN_SKIP_SYSTEM_DEPS:-}" = 1 ] && exit 0

missing=()
# nats-server lives in /usr/sbin, which is not on a non-root user's PATH everywhere
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
[ -x /usr/lib/chromium/chromium ] || command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
[ ${#missing[@]} -eq 0 ] && exit 0

fail() { echo "system-deps: $*" >&2; exit 1; }

command -v apt-get >/dev/null 2>&1 ||
  fail "${missing[*]} missing and there is no apt-get: install ${missing[*]} yourself (nats-server 2.9+, which has JetStream; a Chromium or Chrome binary; wrk), or set SUBRUN_SKIP_SYSTEM_DEPS=1"

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n)
  else fail "${missing[*]} missing; not root and no passwordless sudo: run 'sudo apt-get install -y ${missing[*]}'"; fi
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=120)
echo "system-deps: installing ${missing[*]} (apt-get)" >&2
if ! { "${apt[@]}" update && "${apt[@]}" -y --no-install-recommends install "${missing[@]}"; } >"$log" 2>&1; then
  fail "apt-get install ${missing[*]} failed: $(grep -m1 '^E:' "$log" || grep -m1 '^W:' "$log" || tail -n1 "$log")"
fi
