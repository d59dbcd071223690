#!/usr/bin/env bash
# Regenerates fuzz/workspace-tools.json (the schemas the fuzz target checks
# arguments and results against) from the built workspace plugin, i.e. from
# the same source the server publishes: `wasm-mcp tools` on dist/plugins.
# tests/authoring.rs fails while the file is stale. Needs `just plugins`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WT="$(mktemp -d)"
trap 'rm -rf "$WT"' EXIT
# Without `_meta` (the plugin's digest changes with every build).
bash "$ROOT/scripts/run-bin.sh" wasm-mcp tools --worktree "$WT" --plugins dist/plugins 2>/dev/null \
  | python3 -c 'import json,sys; t=json.load(sys.stdin); [x.pop("_meta",None) for x in t]; print(json.dumps(t,indent=2))' \
  > fuzz/workspace-tools.json.new
mv fuzz/workspace-tools.json.new fuzz/workspace-tools.json
echo "fuzz-schemas: fuzz/workspace-tools.json regenerated" >&2
