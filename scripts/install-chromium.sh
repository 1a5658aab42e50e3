#!/usr/bin/env bash
# Install Debian's chromium for the browser tests in tests/ui/.
#
# Idempotent: does nothing when `chromium` is already on PATH. Playwright's own
# browser download is not used; the tests launch this system binary through
# `executable_path`. Runs apt-get through sudo when not root.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium already installed: $(command -v chromium)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-chromium: not root and sudo is not available" >&2
    exit 1
fi

APT=(apt-get -o DPkg::Lock::Timeout=300)
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" "${APT[@]}" update
"${SUDO[@]}" "${APT[@]}" install -y chromium

echo "chromium installed: $(command -v chromium)"
chromium --version || true
