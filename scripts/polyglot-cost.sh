#!/usr/bin/env bash
# What a tool costs per language (component size, cold and warm start, p50
# call, memory floor): the Rust workspace plugin vs the Python and JavaScript
# samples, each served alone by `wasm-mcp serve`. Builds the plugins and the
# release server first. Numbers in README.md ("Tools in Python and JavaScript").
#   bash scripts/polyglot-cost.sh [--calls N] [--server PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-plugins.sh
if [[ " $* " != *" --server "* ]]; then
  cargo build -q --release -p wasm-mcp-host --bin wasm-mcp
fi
python3 scripts/polyglot-cost.py "$@"
