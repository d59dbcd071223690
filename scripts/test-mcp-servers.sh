#!/usr/bin/env bash
# Third-party MCP code for the tests, installed from the package registries:
# - .venv with the official Python MCP SDK 1.x (FastMCP), shared with the bench
#   (harness/tests/third_party.rs, tests/sdk_clients.rs);
# - .venv-mcp2 with the official Python MCP SDK 2.x, whose default client
#   speaks 2026-07-28 (tests/sdk_clients.rs);
# - in .cache/mcp-node, when npm exists: @modelcontextprotocol/server-filesystem
#   (harness/tests/third_party.rs) and the TypeScript SDK @modelcontextprotocol/sdk
#   (tests/sdk_clients.rs).
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bench-baseline-venv.sh

VENV2=.venv-mcp2
SPEC2='mcp>=2.3,<3'
PY2="$VENV2/bin/python"
have_sdk2() {
    [ -x "$PY2" ] && "$PY2" -c 'from importlib.metadata import version; import sys; sys.exit(0 if version("mcp").split(".")[0] == "2" else 1)' 2>/dev/null
}
if ! have_sdk2; then
    [ -x "$PY2" ] || python3 -m venv "$VENV2"
    echo "mcp test clients: installing $SPEC2 into $VENV2"
    "$PY2" -m pip install --quiet --disable-pip-version-check "$SPEC2"
    have_sdk2 || { echo "mcp test clients: $SPEC2 did not install correctly" >&2; exit 1; }
fi
echo "mcp test clients: $("$PY2" -c 'from importlib.metadata import version; print("mcp", version("mcp"))') in $VENV2"

NODE_DIR=.cache/mcp-node
FS_PKG='@modelcontextprotocol/server-filesystem@2026.8.31'
FS_BIN="$NODE_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
SDK_PKG='@modelcontextprotocol/sdk@1.32.2'
SDK_JSON="$NODE_DIR/node_modules/@modelcontextprotocol/sdk/package.json"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "mcp test servers: node/npm not found: the server-filesystem and TypeScript SDK tests will be skipped"
    exit 0
fi
sdk_direct() {
    # Installed as our own dependency (not only as server-filesystem's).
    [ -f "$SDK_JSON" ] && grep -q '"@modelcontextprotocol/sdk"' "$NODE_DIR/package.json" 2>/dev/null
}
if [ -f "$FS_BIN" ] && sdk_direct; then
    echo "mcp test servers: $FS_PKG and $SDK_PKG already in $NODE_DIR"
    exit 0
fi
mkdir -p "$NODE_DIR"
echo "mcp test servers: installing $FS_PKG and $SDK_PKG into $NODE_DIR"
npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent "$FS_PKG" "$SDK_PKG"
[ -f "$FS_BIN" ] || { echo "mcp test servers: $FS_BIN missing after install" >&2; exit 1; }
[ -f "$SDK_JSON" ] || { echo "mcp test servers: $SDK_JSON missing after install" >&2; exit 1; }
