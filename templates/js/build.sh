#!/usr/bin/env bash
# Builds {{name}}.wasm: the JavaScript modules next to this file (app.js
# exports `tool`) -> a WASI 0.2 component exporting the wasm-mcp tool
# interface (wit/tool.wit, world tool-plugin), with componentize-js
# (SpiderMonkey) and the WASI WIT files shipped with jco.
#
#   bash build.sh [OUT.wasm]          default OUT: {{name}}.wasm next to this file
#
# First run: installs componentize-js and jco (versions pinned below) with npm
# under $WASM_MCP_TOOLCHAINS (default: .toolchain/ next to this file); needs
# node, npm and the npm registry. Later runs reuse it and need no network.
# $WASM_MCP_WIT: the directory holding tool.wit (default: wit/ next to this file).
set -euo pipefail
NAME="{{name}}"
COMPONENTIZE_JS=0.23.0
JCO=1.35.0
WASI=0.2.12 # the WASI version app.js imports (wasi:filesystem/preopens@0.2.12)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(realpath -m "${1:-$HERE/$NAME.wasm}")"
TOOLCHAINS="${WASM_MCP_TOOLCHAINS:-$HERE/.toolchain}"
WIT="${WASM_MCP_WIT:-$HERE/wit}"
NODE_DIR="$TOOLCHAINS/componentize-js-$COMPONENTIZE_JS-jco-$JCO"
BIN="$NODE_DIR/node_modules/.bin"
WASI_WIT="$NODE_DIR/node_modules/@bytecodealliance/jco/lib/wit/builtin/$WASI"

[ -f "$WIT/tool.wit" ] || { echo "build: $WIT/tool.wit not found (set WASM_MCP_WIT)" >&2; exit 1; }
if [ ! -f "$NODE_DIR/.installed" ]; then
  echo "build: installing componentize-js $COMPONENTIZE_JS and jco $JCO into $NODE_DIR" >&2
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent \
    "@bytecodealliance/componentize-js@$COMPONENTIZE_JS" "@bytecodealliance/jco@$JCO"
  touch "$NODE_DIR/.installed"
fi

# The build dir: the tool's own modules (not tests) and the world it
# targets, which adds to tool-plugin the WASI filesystem the glue reads with.
SRC="$(mktemp -d)"
trap 'rm -rf "$SRC"' EXIT
for f in "$HERE"/*.js; do
  case "$(basename "$f")" in *.test.js) ;; *) cp "$f" "$SRC/" ;; esac
done
mkdir -p "$SRC/wit/deps/tool"
cp "$WIT/tool.wit" "$SRC/wit/deps/tool/"
for p in io clocks filesystem; do cp -r "$WASI_WIT/wasi-$p" "$SRC/wit/deps/"; done
cat >"$SRC/wit/plugin.wit" <<WIT
package wasm-mcp:plugin;

world plugin {
  include wasm-mcp:tool/tool-plugin@0.1.0;
  import wasi:filesystem/preopens@$WASI;
}
WIT
mkdir -p "$(dirname "$OUT")"
# No HTTP: the sandbox has no network, and the host links no wasi:http.
(cd "$SRC" && "$BIN/componentize-js" app.js --wit wit --world-name plugin \
  --disable http fetch-event -o out.wasm >&2)
mv "$SRC/out.wasm" "$OUT"
echo "build: $OUT" >&2
