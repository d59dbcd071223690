#!/usr/bin/env bash
# Calls the tool through `wasm-mcp call` (no MCP client needed) on a scratch
# worktree and checks the result. Builds first if {{name}}.wasm is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
WASM_MCP="${WASM_MCP:-wasm-mcp}"
[ -f {{name}}.wasm ] || ./build.sh
WT="$(mktemp -d)"; PLUGINS="$(mktemp -d)"
trap 'rm -rf "$WT" "$PLUGINS"' EXIT
printf 'one two\nthree\n' > "$WT/sample.txt"
cp {{name}}.wasm "$PLUGINS/"
OUT="$("$WASM_MCP" call --worktree "$WT" --plugins "$PLUGINS" {{name}} '{"path": "sample.txt"}')"
echo "$OUT"
echo "$OUT" | grep -q '"lines": 2' || { echo "test: FAILED (expected 2 lines)" >&2; exit 1; }
echo "test: ok" >&2
