#!/usr/bin/env bash
# The VM lane: run railbed's kernel paths (the prio qdisc, netem, fq) on a real
# Debian kernel that has them, under qemu, when this machine's kernel does not.
#
#   sudo bash scripts/vm-test.sh          build the guest if needed, then run the lane
#   sudo bash scripts/vm-test.sh build    only build (or check) the cached guest
#   sudo bash scripts/vm-test.sh run      only run (the guest must be built)
#   sudo bash scripts/vm-test.sh clean    delete the cached guest
#
# The guest (cached in $RAILBED_VM_CACHE, default /var/cache/railbed-vm):
# Debian 12 from debootstrap with linux-image-amd64 (6.1: sch_prio, sch_netem,
# sch_fq, HTB, u32, veth, bridge, 9p as modules), provisioned in a chroot on
# this machine by the project's own scripts/provision.sh (apt packages, the
# virtual environment in /opt/railbed/venv, railbed installed editable from
# /opt/railbed/src). It is rebuilt when provision.sh, setup.cfg or this
# script's build functions change (stamp()).
#
# A run boots the guest's kernel and initramfs with qemu (KVM when a probe
# boot under KVM prints the kernel banner within RAILBED_VM_KVM_PROBE_S
# seconds, TCG otherwise), the root image opened read-only (snapshot=on), the
# working tree shared read-only over 9p at /opt/railbed/src (so the guest runs
# this tree's code) and an output directory shared writable. The guest has no
# network device (-nic none): only the namespaces its tests build.
# The guest runs scripts/vm-guest.sh: railbed doctor, the emulation tests of
# the kernel paths, the measurements of bench/bench_kernel_paths.py; then it
# powers off. Every step here is bounded by `timeout`.
#
# The lane fails when the guest's kernel lacked prio, netem or fq, or when any
# test of tests/emulation/test_kernel_paths.py was skipped, failed or did not run.
#
# Environment: RAILBED_VM_CACHE, RAILBED_VM_ACCEL (auto|kvm|tcg), RAILBED_VM_CPUS (2),
# RAILBED_VM_MEM_MB (2048), RAILBED_VM_RUN_S (run time limit, 2400),
# RAILBED_VM_BUILD_S (per build step, 2400), RAILBED_VM_OUT (keep the guest's
# output there), DEBIAN_MIRROR (http://deb.debian.org/debian),
# RAILBED_VM_BENCH=0 (skip the measurements), RAILBED_VM_PROBE=<script in the
# tree> (run that bash script in the guest instead of the lane: for
# investigations; its output is printed, the lane's checks are not made).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${RAILBED_VM_CACHE:-/var/cache/railbed-vm}"
ACCEL="${RAILBED_VM_ACCEL:-auto}"
CPUS="${RAILBED_VM_CPUS:-2}"
MEM="${RAILBED_VM_MEM_MB:-2048}"
RUN_S="${RAILBED_VM_RUN_S:-2400}"
BUILD_S="${RAILBED_VM_BUILD_S:-2400}"
KVM_PROBE_S="${RAILBED_VM_KVM_PROBE_S:-20}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
IMG_SIZE=6G
HOST_PACKAGES=(qemu-system-x86 debootstrap e2fsprogs)
# Everything else the guest gets comes from provision.sh inside the chroot.
GUEST_PACKAGES=linux-image-amd64,kmod,ca-certificates,python3,iproute2,procps
# The build's inputs: a change to any of them rebuilds the guest.
BUILD_VERSION=1

say() { printf 'vm-test: %s\n' "$*"; }
die() { printf 'vm-test: %s\n' "$*" >&2; exit 1; }
elapsed() { echo $(( $(date +%s) - START )); }
START=$(date +%s)

stamp() {
  { echo "version $BUILD_VERSION $SUITE $MIRROR $GUEST_PACKAGES"
    cat "$REPO/scripts/provision.sh" "$REPO/setup.cfg"
    declare -f install_init provision_chroot
  } | sha256sum | cut -c1-16
}

host_tools() {
  local missing=()
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  # (not `mkfs.ext4 -V | grep -q`: under pipefail, grep's early exit can fail the pipe)
  local mke2fs
  mke2fs="$(mkfs.ext4 -V 2>&1 || true)"
  [[ "$mke2fs" == *"mke2fs 1.4"[3-9]* ]] || missing+=(e2fsprogs)  # 1.43+ has mkfs -d
  if [ "${#missing[@]}" -gt 0 ]; then
    say "host: installing ${HOST_PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get update -qq
    timeout 900 apt-get install -y -qq --no-install-recommends "${HOST_PACKAGES[@]}" >/dev/null
  fi
}

# ------------------------------------------------------------------ build
ROOT=""
unmount_chroot() {
  [ -n "$ROOT" ] || return 0
  for m in dev/pts dev proc sys run; do
    mountpoint -q "$ROOT/$m" && umount -l "$ROOT/$m" || true
  done
}

build() {
  host_tools
  local want have
  want="$(stamp)"
  have="$(cat "$CACHE/stamp" 2>/dev/null || true)"
  if [ "$want" = "$have" ] && [ -f "$CACHE/guest.img" ] && [ -f "$CACHE/vmlinuz" ] && [ -f "$CACHE/initrd.img" ]; then
    say "guest cached in $CACHE (stamp $want)"
    return 0
  fi
  say "building the guest in $CACHE (stamp $want; was ${have:-none})"
  mkdir -p "$CACHE"
  rm -f "$CACHE/stamp"
  ROOT="$CACHE/root"
  trap unmount_chroot EXIT
  unmount_chroot
  if [ "$(cat "$CACHE/debootstrap.done" 2>/dev/null)" = "$want" ] && [ -d "$ROOT" ]; then
    say "reusing the debootstrapped root of an earlier, unfinished build"
  else
    rm -f "$CACHE/debootstrap.done"
    rm -rf --one-file-system "$ROOT"
    say "debootstrap $SUITE ($MIRROR) with $GUEST_PACKAGES"
    timeout "$BUILD_S" debootstrap --variant=minbase --include="$GUEST_PACKAGES" "$SUITE" "$ROOT" "$MIRROR" \
      > "$CACHE/debootstrap.log" 2>&1 || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed"; }
    echo "$want" > "$CACHE/debootstrap.done"
    say "debootstrap done ($(elapsed) s)"
  fi
  provision_chroot
  install_init
  local kver
  kver="$(ls "$ROOT/lib/modules" | sort -V | tail -1)"
  cp "$ROOT/boot/vmlinuz-$kver" "$CACHE/vmlinuz"
  cp "$ROOT/boot/initrd.img-$kver" "$CACHE/initrd.img"
  echo "$kver" > "$CACHE/kernel-version"
  say "guest kernel $kver"
  unmount_chroot
  say "writing the root image"
  rm -f "$CACHE/guest.img"
  timeout "$BUILD_S" mkfs.ext4 -q -F -L railbed-root -d "$ROOT" "$CACHE/guest.img" "$IMG_SIZE"
  rm -rf --one-file-system "$ROOT"
  rm -f "$CACHE/debootstrap.done"
  ROOT=""
  echo "$want" > "$CACHE/stamp"
  say "guest built in $(elapsed) s: $(du -sh --apparent-size "$CACHE/guest.img" | cut -f1) image (sparse: $(du -sh "$CACHE/guest.img" | cut -f1))"
}

provision_chroot() {
  mkdir -p "$ROOT/opt/railbed/src"
  git -C "$REPO" ls-files -z --cached --others --exclude-standard \
    | (cd "$REPO" && xargs -0 cp --parents -t "$ROOT/opt/railbed/src" 2>/dev/null || true)
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  # Local certificate authorities of this machine (a TLS-inspecting proxy's, say), so
  # pip in the chroot trusts what the host trusts.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >/dev/null 2>&1 || true
  fi
  echo railbed-vm > "$ROOT/etc/hostname"
  mount -t proc proc "$ROOT/proc"
  mount -t sysfs sys "$ROOT/sys"
  mount --bind /dev "$ROOT/dev"
  mount --bind /dev/pts "$ROOT/dev/pts"
  mount -t tmpfs tmpfs "$ROOT/run"
  say "provisioning the guest in a chroot (scripts/provision.sh)"
  timeout "$BUILD_S" chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 RAILBED_SKIP_DOCTOR=1 PIP_DEFAULT_TIMEOUT=180 \
    bash /opt/railbed/src/scripts/provision.sh > "$CACHE/provision.log" 2>&1 \
    || { tail -30 "$CACHE/provision.log" >&2; die "provisioning the guest failed"; }
  chroot "$ROOT" apt-get clean
  say "provisioned ($(elapsed) s)"
}

install_init() {
  # PID 1 of the guest: mount what the tests need, hand over to the shared
  # tree's scripts/vm-guest.sh, record its exit status, power off.
  cat > "$ROOT/sbin/railbed-vm-init" <<'EOF'
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc 2>/dev/null; mount -t sysfs sys /sys 2>/dev/null; mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
modprobe 9pnet_virtio 2>/dev/null; modprobe 9p 2>/dev/null
mkdir -p /mnt/out
mount -t 9p -o trans=virtio,version=9p2000.L,ro src /opt/railbed/src
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /mnt/out
hostname railbed-vm
ip link set lo up
bash /opt/railbed/src/scripts/vm-guest.sh > /mnt/out/guest.log 2>&1
echo $? > /mnt/out/status
sync; umount /mnt/out
echo 1 > /proc/sys/kernel/sysrq; echo o > /proc/sysrq-trigger
sleep 30
EOF
  chmod 755 "$ROOT/sbin/railbed-vm-init"
}

# -------------------------------------------------------------------- run
kvm_works() {
  # A KVM boot once hung with no output on this kind of host: boot the kernel
  # with no root (it panics and qemu exits) and call KVM usable only when the
  # banner appears in time.
  [ -r /dev/kvm ] || return 1
  local log
  log="$(mktemp)"
  timeout "$KVM_PROBE_S" qemu-system-x86_64 -machine q35,accel=kvm -cpu host -m 256 -nographic -no-reboot \
    -nic none -kernel "$CACHE/vmlinuz" -append "console=ttyS0 panic=-1 root=/dev/nonexistent" \
    > "$log" 2>&1 || true
  if grep -q "Linux version" "$log"; then rm -f "$log"; return 0; fi
  say "KVM probe printed no kernel banner in ${KVM_PROBE_S} s: $(tr -d '\r' < "$log" | tail -c 300 | tr '\n' ' ')" >&2
  rm -f "$log"
  return 1
}

pick_accel() {
  case "$ACCEL" in
    kvm) echo kvm ;;
    tcg) echo tcg ;;
    auto) if kvm_works; then echo kvm; else echo tcg; fi ;;
    *) die "RAILBED_VM_ACCEL must be auto, kvm or tcg" ;;
  esac
}

run() {
  [ -f "$CACHE/stamp" ] || die "no guest in $CACHE: run 'sudo bash scripts/vm-test.sh build' first"
  [ "$(cat "$CACHE/stamp")" = "$(stamp)" ] || say "warning: the cached guest is older than provision.sh/setup.cfg (rebuild with 'build')"
  local out accel cpu t0
  out="${RAILBED_VM_OUT:-$(mktemp -d /tmp/railbed-vm-out.XXXXXX)}"
  mkdir -p "$out"
  rm -f "$out/status" "$out/junit.xml"
  accel="$(pick_accel)"
  cpu=max; [ "$accel" = kvm ] && cpu=host
  say "booting the guest ($accel, $CPUS CPUs, $MEM MB, limit $RUN_S s); output in $out"
  say "host load before: $(cut -d' ' -f1-3 /proc/loadavg) (an emulated guest's timing depends on it)"
  t0=$(date +%s)
  timeout --kill-after=10 "$RUN_S" qemu-system-x86_64 -machine "q35,accel=$accel" -cpu "$cpu" -smp "$CPUS" -m "$MEM" \
    -nographic -no-reboot -nic none \
    -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 init=/sbin/railbed-vm-init panic=-1 quiet RAILBED_BENCH=${RAILBED_VM_BENCH:-1}${RAILBED_VM_PROBE:+ RAILBED_PROBE=$RAILBED_VM_PROBE}" \
    -drive "file=$CACHE/guest.img,if=virtio,format=raw,snapshot=on" \
    -virtfs "local,path=$REPO,mount_tag=src,security_model=none,readonly=on" \
    -virtfs "local,path=$out,mount_tag=out,security_model=none" \
    > "$out/console.log" 2>&1 || say "qemu ended with status $? (124: the time limit)"
  say "guest ran $(( $(date +%s) - t0 )) s; host load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "${RAILBED_VM_PROBE:-}" ]; then
    sed 's/^/vm-test: guest: /' "$out/guest.log" 2>/dev/null || tail -40 "$out/console.log" >&2
    [ "$(cat "$out/status" 2>/dev/null)" = 0 ] || die "the probe did not finish with status 0"
    return 0
  fi
  report "$out"
}

report() {
  local out="$1"
  [ -f "$out/status" ] || { tail -40 "$out/console.log" >&2; die "the guest did not finish (see $out/console.log)"; }
  sed -n '/^qdiscs that work/p;/^qdiscs missing/p' "$out/doctor.txt" | sed 's/^/vm-test: guest /'
  [ -f "$out/bench.txt" ] && sed 's/^/vm-test: bench: /' "$out/bench.txt"
  tail -15 "$out/guest.log" | sed 's/^/vm-test: guest: /'
  python3 - "$out" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

out = Path(sys.argv[1])
problems = []
have = set()
for line in (out / "doctor.txt").read_text().splitlines():
    if line.startswith("qdiscs that work:"):
        have = {q.strip() for q in line.split(":", 1)[1].split(",")}
for q in ("htb", "prio", "netem", "fq"):
    if q not in have:
        problems.append(f"the guest kernel has no {q}: its path was not exercised")
junit = out / "junit.xml"
cases = ET.parse(junit).getroot().iter("testcase") if junit.exists() else []
ran = 0
for case in cases:
    ran += 1
    name = case.get("name")
    props = [f"{p.get('name')}={p.get('value')}" for p in case.iter("property")]
    if props:
        print(f"vm-test: {name}: {', '.join(props)}")
    for tag in ("skipped", "failure", "error"):
        node = case.find(tag)
        if node is not None:
            problems.append(f"{name}: {tag} {(node.get('message') or '')[:200]}")
if not ran:
    problems.append("no kernel-path test ran")
status = (out / "status").read_text().strip()
if status != "0":
    problems.append(f"the guest's test script exited with {status}")
print(f"vm-test: {ran} kernel-path tests ran in the guest")
for p in problems:
    print(f"vm-test: FAIL: {p}")
sys.exit(1 if problems else 0)
EOF
}

main() {
  [ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot, mounts)"
  case "${1:-all}" in
    build) build ;;
    run) run ;;
    all) build; run ;;
    clean) rm -rf --one-file-system "$CACHE"; say "removed $CACHE" ;;
    *) die "usage: vm-test.sh [all|build|run|clean]" ;;
  esac
  say "done in $(elapsed) s"
}

main "$@"
