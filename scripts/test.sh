#!/usr/bin/env bash
# Run the test suite (the test command of README.md). Emulation tests need root.
#
# Without a selection among the arguments, two pytest runs: the emulation tests
# first, one at a time and alone on the machine (one testbed per machine, and
# they measure with the CPU they run on), then every other test spread over the
# cores with pytest-xdist (RAILBED_TEST_WORKERS, default: the number of cores;
# 1 runs them in one process). Arguments that select tests (a path, -m, -k) give
# one pytest run as written. Other arguments go to both runs (e.g. -v).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-/opt/railbed/venv}"
cd "$REPO"
"$VENV/bin/ruff" check . || exit 1

none_ran() {
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
}

select=0
for arg in "$@"; do
  case "$arg" in
    -m | -k | -m?* | -k?* | [!-]*) select=1 ;;
  esac
done
if [ "$select" = 1 ]; then
  "$VENV/bin/python" -m pytest "$@"
  rc=$?
  [ "$rc" = 5 ] && none_ran
  exit "$rc"
fi

# The emulation run's short summary is kept and printed again at the end when it failed: a log
# read from its tail (CI's) then names the failed emulation tests, not only the last run's.
emu_log="$(mktemp)"
trap 'rm -f "$emu_log"' EXIT
"$VENV/bin/python" -u -m pytest -m emulation -rfE "$@" | tee "$emu_log"
emulated=${PIPESTATUS[0]}
[ "$emulated" = 5 ] && emulated=0 # no emulation test collected: the second run must run some
workers="${RAILBED_TEST_WORKERS:-$(nproc)}"
spread=()
[ "$workers" -gt 1 ] && spread=(-n "$workers" --dist load)
"$VENV/bin/python" -m pytest -m "not emulation" "${spread[@]}" "$@"
rest=$?
[ "$rest" = 5 ] && none_ran
if [ "$emulated" != 0 ]; then
  { # on both streams: a log may keep either
    echo "test.sh: the emulation run failed (pytest exit $emulated):"
    grep -E '^(FAILED|ERROR) ' "$emu_log" || tail -n 20 "$emu_log"
  } | tee /dev/stderr
  exit "$emulated"
fi
exit "$rest"
