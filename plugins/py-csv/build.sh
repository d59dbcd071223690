#!/usr/bin/env bash
# Builds py-csv.wasm: the Python modules next to this file (app.py defines
# the exported `Tool`) -> a WASI 0.2 component exporting the wasm-mcp tool
# interface (wit/tool.wit, world tool-plugin), with componentize-py.
#
#   bash build.sh [OUT.wasm]          default OUT: py-csv.wasm next to this file
#
# First run: installs componentize-py (version pinned below) into a venv under
# $WASM_MCP_TOOLCHAINS (default: .toolchain/ next to this file); needs python3
# and PyPI. Later runs reuse it and need no network.
# $WASM_MCP_WIT: the directory holding tool.wit (default: wit/ next to this file).
set -euo pipefail
NAME="py-csv"
COMPONENTIZE_PY=0.25.1

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(realpath -m "${1:-$HERE/$NAME.wasm}")"
TOOLCHAINS="${WASM_MCP_TOOLCHAINS:-$HERE/.toolchain}"
WIT="${WASM_MCP_WIT:-$HERE/wit}"
VENV="$TOOLCHAINS/componentize-py-$COMPONENTIZE_PY"

[ -f "$WIT/tool.wit" ] || { echo "build: $WIT/tool.wit not found (set WASM_MCP_WIT)" >&2; exit 1; }
if [ ! -f "$VENV/.installed" ]; then
  echo "build: installing componentize-py $COMPONENTIZE_PY into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY"
  touch "$VENV/.installed"
fi

# Only the tool's own modules go into the component (not tests, not caches).
SRC="$(mktemp -d)"
trap 'rm -rf "$SRC"' EXIT
for f in "$HERE"/*.py; do
  case "$(basename "$f")" in test_*.py) ;; *) cp "$f" "$SRC/" ;; esac
done
mkdir -p "$(dirname "$OUT")"
(cd "$SRC" && "$VENV/bin/componentize-py" -d "$WIT" -w tool-plugin componentize app -p . -o "$SRC/out.wasm" >&2)
mv "$SRC/out.wasm" "$OUT"
echo "build: $OUT" >&2
