#!/usr/bin/env bash
# Builds the tool plugins (plugins/, its own cargo workspace) into WASI 0.2
# components:
#   dist/plugins/workspace.wasm      product plugins (the default plugin dir)
#   dist/test-plugins/*.wasm         TEST-ONLY (hostile, badmeta, slowload), never in the default dir
# Run from anywhere (`just plugins` runs it from the repo root).
#
# Path selection (override with GUEST_TARGET=wasm32-wasip2|wasm32-wasip1):
#   * rustup has wasm32-wasip2 installed: plain `cargo build --target
#     wasm32-wasip2` (rustc links a component directly);
#   * otherwise: Debian's rustc + -Zbuild-std for wasm32-wasip1
#     (scripts/wasm-guest-env.sh, installs apt packages if missing), then the
#     core module is componentized with the wasi preview1 reactor adapter.
# Either way tools/componentize validates each artifact and checks that it
# exports wasm-mcp:tool/tool@0.1.0. VERBOSE=1 shows cargo's output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PLUGINS_TARGET_DIR="$ROOT/plugins/target"
Q=(-q)
[ "${VERBOSE:-0}" = 1 ] && Q=()

# product plugins: crate artifact name -> dist name
PRODUCT=(workspace_tools:workspace)
TEST_ONLY=(hostile:hostile badmeta:badmeta slowload:slowload diskbomb:diskbomb bigwire:bigwire conformance:conformance)

if [ -z "${GUEST_TARGET:-}" ]; then
  if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    GUEST_TARGET=wasm32-wasip2
  else
    GUEST_TARGET=wasm32-wasip1
  fi
fi

# 1. The componentize tool, with the normal (rustup) toolchain.
cargo build "${Q[@]}" -p componentize
COMPONENTIZE="$(cargo metadata --format-version 1 --no-deps \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug/componentize"
[ -x "$COMPONENTIZE" ] || { echo "build-plugins: $COMPONENTIZE missing" >&2; exit 1; }

# 2. The guests, in a subshell so the guest toolchain env does not leak.
echo "build-plugins: building guests for $GUEST_TARGET" >&2
case "$GUEST_TARGET" in
  wasm32-wasip2)
    ( cargo build "${Q[@]}" --manifest-path plugins/Cargo.toml --release \
        --target wasm32-wasip2 --target-dir "$PLUGINS_TARGET_DIR" )
    ;;
  wasm32-wasip1)
    ( . scripts/wasm-guest-env.sh
      cargo build "${Q[@]}" --manifest-path plugins/Cargo.toml --release \
        --target wasm32-wasip1 -Zbuild-std=std,panic_abort \
        --target-dir "$PLUGINS_TARGET_DIR" )
    ;;
  *) echo "build-plugins: unsupported GUEST_TARGET=$GUEST_TARGET" >&2; exit 1 ;;
esac
OUT="$PLUGINS_TARGET_DIR/$GUEST_TARGET/release"

# 3. Componentize (wasip1) or validate + copy (wasip2, already a component).
emit() { # <crate artifact> <dist dir> <name>
  mkdir -p "$2"
  "$COMPONENTIZE" "$OUT/$1.wasm" "$2/$3.wasm" --adapter reactor
}
for p in "${PRODUCT[@]}"; do emit "${p%%:*}" dist/plugins "${p##*:}"; done
for p in "${TEST_ONLY[@]}"; do emit "${p%%:*}" dist/test-plugins "${p##*:}"; done
