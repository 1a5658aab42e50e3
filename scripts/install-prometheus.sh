#!/usr/bin/env bash
# Install Debian's prometheus for tests/test_metrics_prometheus.py (a real Prometheus scrapes the
# quota service and runs the Grafana dashboard's queries).
#
# Idempotent: does nothing when `prometheus` is already on PATH. Only the binary is used: the
# test starts its own, on a free port with a generated config; the package's service is stopped
# where the package started one. Runs apt-get through sudo when not root.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1; then
    echo "prometheus already installed: $(command -v prometheus)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-prometheus: not root and sudo is not available" >&2
    exit 1
fi

APT=(apt-get -o DPkg::Lock::Timeout=300)
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" "${APT[@]}" update
"${SUDO[@]}" "${APT[@]}" install -y --no-install-recommends prometheus
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    "${SUDO[@]}" systemctl disable --now prometheus || true  # the tests run their own
fi

echo "prometheus installed: $(command -v prometheus)"
prometheus --version | head -1 || true
