#!/usr/bin/env bash
# Third-party MCP servers for the harness tests (harness/tests/third_party.rs):
# - .venv with the official Python MCP SDK (FastMCP), shared with the bench;
# - @modelcontextprotocol/server-filesystem in .cache/mcp-node, when npm exists.
# Idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bench-baseline-venv.sh

NODE_DIR=.cache/mcp-node
FS_PKG='@modelcontextprotocol/server-filesystem@2026.8.31'
FS_BIN="$NODE_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "mcp test servers: node/npm not found: the server-filesystem test will be skipped"
    exit 0
fi
if [ -f "$FS_BIN" ]; then
    echo "mcp test servers: $FS_PKG already in $NODE_DIR"
    exit 0
fi
mkdir -p "$NODE_DIR"
echo "mcp test servers: installing $FS_PKG into $NODE_DIR"
npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent "$FS_PKG"
[ -f "$FS_BIN" ] || { echo "mcp test servers: $FS_BIN missing after install" >&2; exit 1; }
