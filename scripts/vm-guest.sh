#!/bin/bash
# Runs inside the VM lane's guest (started by scripts/vm-test.sh as PID 1's
# child, as root): the working tree is at /opt/railbed/src (read-only 9p),
# results go to /mnt/out. Prints the kernel and its qdiscs (railbed doctor),
# runs the kernel-path emulation tests (CI=1: a missing prerequisite fails),
# then, unless RAILBED_BENCH=0 is on the kernel command line, the
# measurements that decide railbed's default paths.
set -u
cd /opt/railbed/src
export PYTHONDONTWRITEBYTECODE=1 NUMBA_CACHE_DIR=/tmp/numba CI=1
PY=/opt/railbed/venv/bin/python
echo "guest: kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MB"
t0=$(date +%s)
railbed doctor > /mnt/out/doctor.txt 2>&1
cat /mnt/out/doctor.txt
echo "guest: doctor took $(( $(date +%s) - t0 )) s"
# RAILBED_PROBE=<script in the tree> on the kernel command line (vm-test.sh's
# RAILBED_VM_PROBE): run that script instead of the lane, for investigations.
probe="$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^RAILBED_PROBE=//p')"
if [ -n "$probe" ]; then
  t0=$(date +%s)
  timeout 1200 bash "$probe"
  rc=$?
  echo "guest: probe $probe exited $rc after $(( $(date +%s) - t0 )) s"
  exit "$rc"
fi
t0=$(date +%s)
timeout 1200 "$PY" -m pytest tests/emulation/test_kernel_paths.py -v -p no:cacheprovider \
  --junitxml=/mnt/out/junit.xml -o junit_family=legacy  # legacy (xunit1) keeps record_property values
rc=$?
echo "guest: kernel-path tests exited $rc after $(( $(date +%s) - t0 )) s"
if ! grep -qw RAILBED_BENCH=0 /proc/cmdline; then
  t0=$(date +%s)
  timeout 1500 "$PY" bench/bench_kernel_paths.py --reps 3 --json /mnt/out/bench.json > /mnt/out/bench.txt 2>&1
  echo "guest: bench exited $? after $(( $(date +%s) - t0 )) s"
  cat /mnt/out/bench.txt
fi
exit "$rc"
