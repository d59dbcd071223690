#!/usr/bin/env bash
# Builds {{name}}.wasm, a WASI 0.2 tool component, in this directory.
# Needs: cargo (rustup) and `wasm-mcp` on PATH (or WASM_MCP=/path/to/wasm-mcp).
#   * rustup has wasm32-wasip2: plain `cargo build --target wasm32-wasip2`;
#   * otherwise: Debian's rustc + -Zbuild-std for wasm32-wasip1
#     (./wasm-guest-env.sh installs rustc-web rust-web-src wasi-libc with apt
#     if missing), then `wasm-mcp componentize` adds the WASI preview1 adapter.
# Ends with `wasm-mcp inspect`, which fails if the host could not run it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
WASM_MCP="${WASM_MCP:-wasm-mcp}"
command -v "$WASM_MCP" >/dev/null || { echo "build: $WASM_MCP not found (set WASM_MCP)" >&2; exit 1; }
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
# Wasm SIMD (the SDK's JSON encoder uses it), and 8 MiB of initial memory so
# that a call's allocations need no memory.grow (each costs the host an
# mprotect and its undoing after the call). Untouched pages cost nothing.
GUEST_RUSTFLAGS="-C target-feature=+simd128 -C link-arg=--initial-memory=8388608"
export CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="$GUEST_RUSTFLAGS"
export CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS="$GUEST_RUSTFLAGS"

if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  cargo build -q --release --target wasm32-wasip2
  OUT="$TARGET_DIR/wasm32-wasip2/release/plugin.wasm"
else
  ( . ./wasm-guest-env.sh
    cargo build -q --release --target wasm32-wasip1 -Zbuild-std=std,panic_abort )
  OUT="$TARGET_DIR/wasm32-wasip1/release/plugin.wasm"
fi
"$WASM_MCP" componentize "$OUT" {{name}}.wasm --adapter reactor
"$WASM_MCP" inspect {{name}}.wasm >/dev/null
echo "build: {{name}}.wasm ready" >&2
