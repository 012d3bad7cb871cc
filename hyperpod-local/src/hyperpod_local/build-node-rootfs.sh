#!/usr/bin/env bash
# The root file system of the local cluster's nodes: Debian trixie with Slurm 24.11 (HyperPod's current
# major) or Debian forky (the next release, Slurm's next major: 26.05 when this was written), in HyperPod's
# layout (/opt/slurm/{bin,sbin,etc}), built with mmdebstrap from the packages in node-rootfs.packages. The
# host's own packages stay as they are. hyperpod_local/rootfs.py maps each Slurm major to its suite.
#
#   build-node-rootfs.sh [--suite SUITE]               build unless the cache has it; print its path
#   build-node-rootfs.sh [--suite SUITE] --print-path  print where it is (or would be) without building
#
# SUITE: trixie (default) or forky. Cached in $HYPERPOD_CDK_ROOTFS_CACHE (default
# /var/cache/hyperpod-cdk/node-rootfs)/<sha256 of the suite, the package list and this script>; built in a
# temporary directory beside it and renamed into place, so a killed build never leaves a half root file
# system under the final name. Needs root and network access to the mirror.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
packages_file=$here/node-rootfs.packages
cache=${HYPERPOD_CDK_ROOTFS_CACHE:-/var/cache/hyperpod-cdk/node-rootfs}
mirror=${HYPERPOD_CDK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
print_path=0
while [ $# -gt 0 ]; do
  case $1 in
    --suite) suite=${2:-}; shift 2 || shift ;;
    --suite=*) suite=${1#--suite=}; shift ;;
    --print-path) print_path=1; shift ;;
    *) echo "build-node-rootfs: unknown argument $1 (usage: build-node-rootfs.sh [--suite trixie|forky] [--print-path])" >&2
      exit 2 ;;
  esac
done
case $suite in
  trixie | forky) ;;
  *) echo "build-node-rootfs: --suite: got '$suite'; allowed: trixie, forky" >&2
    exit 2 ;;
esac
key=$({ echo "$suite"; cat "$packages_file" "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-64)
target=$cache/$key

if [ "$print_path" -eq 1 ]; then
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
# A line "PACKAGE SUITE..." names a package only those suites get (one a suite lacks, e.g. testing's removals).
include=$(grep -v -e '^#' -e '^[[:space:]]*$' "$packages_file" |
  awk -v suite="$suite" 'NF == 1 { print $1; next } { for (i = 2; i <= NF; i++) if ($i == suite) print $1 }' |
  paste -sd, -)
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
options=()
if [ "$suite" != trixie ]; then
  # Testing's Release file is valid for a week only (Valid-Until); a mirror or cache that lags behind serves
  # one apt calls expired. The signature is still checked; only the freshness check is off.
  options+=(--aptopt='Acquire::Check-Valid-Until "false"')
fi
mmdebstrap --quiet --variant=apt "${options[@]}" --include="$include" --customize-hook="$hook" \
  "$suite" "$work/root" "$mirror"
chmod 755 "$work/root"
mv -T "$work/root" "$target"
echo "$target"
