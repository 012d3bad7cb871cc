#!/usr/bin/env bash
# Debian packages the local cluster and its tests use: Slurm, munge, accounting (MariaDB + slurmdbd),
# node_exporter and Prometheus (metrics), the shell linter, mmdebstrap (scripts/build-node-rootfs.sh) and iptables
# (the generic platform's nodes, which run on this root, keep the metadata service for root only).
# Installs only what is missing. Package scripts must not start daemons on this machine, so a policy-rc.d
# that denies them is put in place for the install when the machine has none.
set -euo pipefail
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-packages: skipped: the local cluster needs a Debian or Ubuntu machine (apt) and root; its tests" \
    "skip here, and make synth needs none of it" >&2
  exit 0
fi
packages=(slurm-wlm slurmdbd munge mariadb-server mariadb-client shellcheck openssh-client iproute2 util-linux procps
  prometheus prometheus-node-exporter mmdebstrap iptables)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-packages: skipped: missing ${missing[*]}; installing them needs root (sudo make system-packages);" \
    "the local-cluster tests skip without them" >&2
  exit 0
fi
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  added_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ "$added_policy" -eq 1 ]; then
  rm -f "$policy"
fi
