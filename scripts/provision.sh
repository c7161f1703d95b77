#!/usr/bin/env bash
# railbed provisioning: one idempotent script for a fresh Debian 12 / Ubuntu 22.04+
# machine, used by the README, the Vagrantfile and CI. Run as root.
#   VENV=/opt/railbed/venv   where the Python environment goes
#   RAILBED_SKIP_APT=1       skip the apt step (packages already there)
#   RAILBED_SKIP_DOCTOR=1    skip the closing `railbed doctor` (scripts/vm-test.sh provisions
#                            a guest in a chroot, where doctor would probe the host's kernel)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-/opt/railbed/venv}"
APT_PACKAGES=(mininet iproute2 iperf3 ethtool tcpdump iptables bridge-utils iputils-ping
              net-tools kmod procps python3 python3-venv python3-pip python3-dev gcc g++)

say() { printf 'provision: %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "provision: run as root (sudo bash scripts/provision.sh)" >&2
  exit 1
fi

if [ "${RAILBED_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "apt: all packages present"
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PY --version)"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
say "pip: installing railbed (editable) with the test and packet (ns-3) extras"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -e "$REPO[test,packet]"
# Chakra execution traces (workloads/chakra.py): mlc-chakra's generated protobuf code is all railbed
# reads; its hard dependency on HolisticTraceAnalysis (jupyterlab, pandas, ~70 packages) is not needed,
# so it is installed without dependencies (protobuf comes with the test extra).
"$VENV/bin/python" -m pip install -q --no-deps "mlc-chakra>=1.0"
ln -sf "$VENV/bin/railbed" /usr/local/bin/railbed
say "railbed installed: $(command -v railbed)"
if [ "${RAILBED_SKIP_DOCTOR:-0}" != 1 ]; then
  "$VENV/bin/railbed" doctor | sed 's/^/provision: doctor: /'
fi
