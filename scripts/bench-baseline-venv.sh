#!/usr/bin/env bash
# Creates .venv (gitignored) with the official MCP Python SDK, used by the
# benchmark's FastMCP baseline (bench/baseline/read_file_server.py).
# Idempotent: a no-op (well under a second) when the SDK is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
SPEC='mcp>=1.27,<2'
PY="$VENV/bin/python"

have_sdk() {
    [ -x "$PY" ] && "$PY" - <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
major, minor = (int(x) for x in version("mcp").split(".")[:2])
sys.exit(0 if (major, minor) >= (1, 27) and major < 2 else 1)
PY
}

if have_sdk; then
    echo "bench venv: $("$PY" -c 'from importlib.metadata import version; print("mcp", version("mcp"))') already in $VENV"
    exit 0
fi

if [ ! -x "$PY" ]; then
    echo "bench venv: creating $VENV"
    python3 -m venv "$VENV"
fi
echo "bench venv: installing $SPEC"
"$PY" -m pip install --quiet --disable-pip-version-check "$SPEC"
have_sdk || { echo "bench venv: $SPEC did not install correctly" >&2; exit 1; }
echo "bench venv: $("$PY" -c 'from importlib.metadata import version; print("mcp", version("mcp"))') installed in $VENV"
