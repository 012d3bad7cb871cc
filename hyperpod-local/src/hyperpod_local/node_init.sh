#!/bin/bash
# PID 1 of one local-cluster node, started by namespaces.py inside new net, uts, mount, pid, ipc and time
# namespaces:  node_init.sh HOSTNAME NODE_DIR SHARED_DIR FSX_MOUNT_PATH HOSTS_FILE LOWER_DIR [BIND...]
#
# The node's root is an overlay of LOWER_DIR (read-only lower layer: the host's / on the generic platform,
# the trixie root file system on the HyperPod platform) and NODE_DIR/upper (the node's disk, kept across
# crash and boot), so the lifecycle scripts can change anything a real node's scripts change while the
# host stays untouched. Each BIND (a host path) is bind-mounted read-only at the same path in the node. SHARED_DIR is bind-mounted at FSX_MOUNT_PATH (the "FSx" every
# node shares). /run and /dev/shm are private tmpfs, as after a real boot. Prints "hpcdk-node-ready" once
# the node is up, then reaps orphans forever (daemons double-fork; P3 in docs/research/local-slurm.md).
set -euo pipefail

name=$1 dir=$2 shared=$3 fsx=$4 hosts=$5 lower=$6
shift 6
merged=$dir/merged

hostname "$name"
ip link set lo up
# Until pivot_root the host's files are visible; a private /run keeps libmount's utab off the host (P14).
mount -n -t tmpfs -o mode=755 tmpfs /run

mkdir -p "$dir/upper" "$dir/work" "$merged"
# The old overlay of a node that just crashed may still be going away: retry for a few seconds.
for attempt in $(seq 50); do
  if mount -n -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" "$merged"; then
    break
  fi
  if [ "$attempt" = 50 ]; then
    echo "node_init: cannot mount the overlay root of $name" >&2
    exit 1
  fi
  sleep 0.1
done

mount -n -t proc proc "$merged/proc"
mount -n -t sysfs sysfs "$merged/sys"              # a sysfs of the node's own network namespace
if [ -d /sys/fs/cgroup ]; then
  mount -n --rbind /sys/fs/cgroup "$merged/sys/fs/cgroup"
fi
mount -n --rbind /dev "$merged/dev"
mount -n -t tmpfs -o mode=1777 tmpfs "$merged/dev/shm"
mount -n -t tmpfs -o mode=755 tmpfs "$merged/run"
mkdir -p "$merged$fsx"
mount -n --bind "$shared" "$merged$fsx"
for path in "$@"; do
  if [ -d "$path" ]; then
    mkdir -p "$merged$path"
  else
    mkdir -p "$(dirname "$merged$path")"
    [ -e "$merged$path" ] || touch "$merged$path"
  fi
  mount -n --bind "$path" "$merged$path"
  mount -n -o remount,bind,ro "$merged$path"
done

# First boot only: the node's identity, as the instance's image and the VPC's DNS would give it.
if [ ! -e "$dir/upper/etc/hostname" ]; then
  echo "$name" >"$merged/etc/hostname"
fi
if [ ! -e "$dir/upper/etc/hosts" ]; then
  cat "$hosts" >"$merged/etc/hosts"
fi

mkdir -p "$merged/.oldroot"
cd "$merged"
pivot_root . .oldroot
cd /
umount -n -l /.oldroot
rmdir /.oldroot

echo "hpcdk-node-ready $name"
trap 'exit 0' TERM INT
while true; do
  sleep 1000 &
  wait "$!" || true
done
