#!/usr/bin/env bash
# Install Metnos and what it needs on a Debian machine.
#   ./install.sh           the runtime, with the embedded local model's server
#   ./install.sh --test    also what the test suite needs (PostgreSQL, test extras)
#   ./install.sh --bench   also smolagents, the agent benchmark's third column, and bfcl-eval (bench/bfcl.py)
set -euo pipefail
cd "$(dirname "$0")"

with_tests=no
with_bench=no
[ "${1:-}" = "--test" ] && with_tests=yes
[ "${1:-}" = "--bench" ] && with_bench=yes

python=${PYTHON:-python3}

packages=(bubblewrap libseccomp2)
# A C compiler and Python's headers build the full scan's compiled loop (setup.py); without them
# the install goes on and the scan runs its Python loop, slower, with the same events.
packages+=(gcc libc6-dev)
headers=$("$python" -c 'import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null || echo False)
[ "$headers" = True ] || packages+=(python3-dev)
# chromium and its driver: the dashboard is tested in a real headless browser.
[ "$with_tests" = yes ] && packages+=(postgresql graphviz chromium chromium-driver)
# dovecot: the real IMAP server read_messages is tested against.
[ "$with_tests" = yes ] && packages+=(dovecot-imapd)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

extras="embedded"
[ "$with_tests" = yes ] && extras="test,embedded"
[ "$with_bench" = yes ] && extras="embedded,bench"
"$python" -m pip install -q --disable-pip-version-check -e ".[${extras}]"
# BFCL's cases and checker (bench/bfcl.py and its unit test) without bfcl-eval's own dependencies
# (a numpy pin, torch, vllm...), which only its model handlers use; its utils need filelock.
if [ "$with_bench" = yes ] || [ "$with_tests" = yes ]; then
  "$python" -m pip install -q --disable-pip-version-check --no-deps "bfcl-eval>=2026.3.23,<2026.4"
  "$python" -m pip install -q --disable-pip-version-check "filelock>=3.12,<5"
fi

# Installed is not the same as able to start: Metnos refuses to run executors
# where bwrap cannot (DESIGN decision 4), so say so now, with the fix.
if ! status=$(METNOS_SANDBOX=on "$python" -m metnos sandbox status 2>&1); then
  echo "$status" >&2
  cat >&2 <<'FIX'

install.sh: bubblewrap is installed but cannot start here, so Metnos will refuse
to run executors. Usual causes and fixes:
  - unprivileged user namespaces are off: sysctl -w kernel.unprivileged_userns_clone=1
    (Ubuntu 24.04+: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)
  - inside a container: allow user namespaces (e.g. docker run --security-opt seccomp=unconfined)
  - or accept the risk and run executors unsandboxed: export METNOS_SANDBOX=off
FIX
  exit 1
fi
echo "metnos installed: $(command -v metnos || echo "$python -m metnos")"
echo "sandbox: bubblewrap starts"
