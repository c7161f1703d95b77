#!/usr/bin/env bash
# Run the test suite (the test command of README.md). Emulation tests need root.
# Extra arguments go to pytest (e.g. -m "not emulation").
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-/opt/railbed/venv}"
cd "$REPO"
"$VENV/bin/ruff" check . || exit 1
"$VENV/bin/python" -m pytest "$@"
rc=$?
if [ "$rc" = 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$rc"
