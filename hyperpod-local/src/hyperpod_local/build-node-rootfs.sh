#!/usr/bin/env bash
# The root file system of the local cluster's nodes on the emulated HyperPod platform: Debian trixie with
# Slurm 24.11 (HyperPod's current major) in HyperPod's layout (/opt/slurm/{bin,sbin,etc}), built with
# mmdebstrap from the packages in node-rootfs.packages. The host's own packages stay as they are.
#
#   build-node-rootfs.sh               build unless the cache has it; print its path
#   build-node-rootfs.sh --print-path  print where it is (or would be) without building
#
# Cached in $HYPERPOD_CDK_ROOTFS_CACHE (default /var/cache/hyperpod-cdk/node-rootfs)/<sha256 of the package
# list and this script>; built in a temporary directory beside it and renamed into place, so a killed build
# never leaves a half root file system under the final name. Needs root and network access to the mirror.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
packages_file=$here/node-rootfs.packages
cache=${HYPERPOD_CDK_ROOTFS_CACHE:-/var/cache/hyperpod-cdk/node-rootfs}
mirror=${HYPERPOD_CDK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
key=$(cat "$packages_file" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-64)
target=$cache/$key

if [ "${1:-}" = "--print-path" ]; then
  echo "$target"
  exit 0
fi
if [ -e "$target/etc/os-release" ]; then
  echo "$target"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build-node-rootfs: needs root (run it with sudo, or run make setup as root)" >&2
  exit 1
fi
command -v mmdebstrap >/dev/null || {
  echo "build-node-rootfs: mmdebstrap is missing; run ./scripts/install-system-packages.sh" >&2
  exit 1
}
include=$(grep -v -e '^#' -e '^[[:space:]]*$' "$packages_file" | paste -sd, -)
mkdir -p "$cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# HyperPod's AMI puts Slurm under /opt/slurm: link the Debian binaries there, keep the configuration in
# /opt/slurm/etc and point Debian's compiled-in /etc/slurm at it.
# shellcheck disable=SC2016  # the hook runs in mmdebstrap's shell, with the root as \$1
hook='set -e
mkdir -p "$1/opt/slurm/bin" "$1/opt/slurm/sbin" "$1/opt/slurm/etc"
for f in $(chroot "$1" dpkg -L slurm-client slurmctld slurmd slurmdbd | grep -E "^/usr/s?bin/."); do
  case $f in /usr/sbin/*) dir=sbin ;; *) dir=bin ;; esac
  ln -sf "$f" "$1/opt/slurm/$dir/$(basename "$f")"
done
for f in "$1"/usr/sbin/slurm*; do  # slurmctld, slurmd, slurmstepd: Debian alternatives of the -wlm builds
  ln -sf "/usr/sbin/${f##*/}" "$1/opt/slurm/sbin/${f##*/}"
done
cp -a "$1/etc/slurm/." "$1/opt/slurm/etc/" 2>/dev/null || true
rm -rf "$1/etc/slurm"
ln -s /opt/slurm/etc "$1/etc/slurm"
rm -f "$1/etc/hostname" "$1/etc/machine-id"
touch "$1/etc/machine-id"'
mmdebstrap --quiet --variant=apt --include="$include" --customize-hook="$hook" \
  "$suite" "$work/root" "$mirror"
chmod 755 "$work/root"
mv -T "$work/root" "$target"
echo "$target"
