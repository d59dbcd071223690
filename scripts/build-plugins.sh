#!/usr/bin/env bash
# Builds the tool plugins (plugins/, its own cargo workspace) into WASI 0.2
# components:
#   dist/plugins/workspace.wasm      product plugins (the default plugin dir)
#   dist/test-plugins/*.wasm         TEST-ONLY (hostile, badmeta, slowload, hugelist, ...), never in the default dir
#   dist/samples/{py-csv,js-json}.wasm  sample plugins in Python and JavaScript (step 4:
#                                    their own build.sh, toolchains in .cache/polyglot);
#                                    not in the default dir: 30 MB that every server start
#                                    would load (serve them with --plugins dist/samples)
# Run from anywhere (`just plugins` runs it from the repo root).
#
# Path selection (override with GUEST_TARGET=wasm32-wasip2|wasm32-wasip1):
#   * rustup has wasm32-wasip2 installed: plain `cargo build --target
#     wasm32-wasip2` (rustc links a component directly);
#   * otherwise: Debian's rustc + -Zbuild-std for wasm32-wasip1
#     (scripts/wasm-guest-env.sh, installs apt packages if missing), then the
#     core module is componentized with the wasi preview1 reactor adapter;
#     the product plugins are built lean and need no adapter (step 2).
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
TEST_ONLY=(hostile:hostile badmeta:badmeta slowload:slowload hugelist:hugelist manylist:manylist loudload:loudload diskbomb:diskbomb bigwire:bigwire conformance:conformance)

if [ -z "${GUEST_TARGET:-}" ]; then
  if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    GUEST_TARGET=wasm32-wasip2
  else
    GUEST_TARGET=wasm32-wasip1
  fi
fi

# 1. The componentize tool, with the normal (rustup) toolchain.
cargo build "${Q[@]}" -p componentize
COMPONENTIZE="$(bash scripts/target-dir.sh)/debug/componentize"
[ -x "$COMPONENTIZE" ] || { echo "build-plugins: $COMPONENTIZE missing" >&2; exit 1; }

# Wasm SIMD (on by default in wasmtime): the guest SDK's JSON encoder
# (sonic-rs) scans strings 16 bytes at a time with it. 8 MiB of initial
# linear memory: malloc starts with that heap, so a call no longer grows
# memory (each growth, and its undoing when the pooled slot is reset, was
# an mprotect and a TLB flush on every call: small read_file p50 -20%,
# large -13%). Untouched pages cost nothing; the same flags are in
# templates/rust/build.sh.
GUEST_RUSTFLAGS="-C target-feature=+simd128 -C link-arg=--initial-memory=8388608"
export CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="$GUEST_RUSTFLAGS"
export CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS="$GUEST_RUSTFLAGS"

# 2. The guests, in a subshell so the guest toolchain env does not leak.
#    On the wasip1 path the product plugins are built once more, lean:
#    `-Cpanic=immediate-abort` (a panic traps without printing, so nothing
#    links the preview1 `fd_write`, `environ_get` or `proc_exit` that the
#    panic message needs), in their own target dir (another std). With
#    their file I/O through `wasm_mcp_guest::fs` they import no preview1
#    function, so the component has no adapter: pooled instantiation
#    9.6 -> 5.2 µs in wasmtime 48 alone (the adapter is a second core
#    instance with ~30 lowered imports). The test-only plugins keep the
#    adapter and their panic messages.
echo "build-plugins: building guests for $GUEST_TARGET" >&2
LEAN_TARGET_DIR="$PLUGINS_TARGET_DIR/lean"
LEAN_PACKAGES=()
for p in "${PRODUCT[@]}"; do LEAN_PACKAGES+=(-p "$(echo "${p%%:*}" | tr _ -)"); done
case "$GUEST_TARGET" in
  wasm32-wasip2)
    ( cargo build "${Q[@]}" --manifest-path plugins/Cargo.toml --release \
        --target wasm32-wasip2 --target-dir "$PLUGINS_TARGET_DIR" )
    PRODUCT_OUT="$PLUGINS_TARGET_DIR/$GUEST_TARGET/release"
    ;;
  wasm32-wasip1)
    ( . scripts/wasm-guest-env.sh
      cargo build "${Q[@]}" --manifest-path plugins/Cargo.toml --release \
        --target wasm32-wasip1 -Zbuild-std=std,panic_abort \
        --target-dir "$PLUGINS_TARGET_DIR" --workspace "${LEAN_PACKAGES[@]/#-p/--exclude}"
      CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="$GUEST_RUSTFLAGS -Zunstable-options -Cpanic=immediate-abort" \
        cargo build "${Q[@]}" --manifest-path plugins/Cargo.toml --release \
        --target wasm32-wasip1 -Zbuild-std=std,panic_abort \
        --target-dir "$LEAN_TARGET_DIR" "${LEAN_PACKAGES[@]}" )
    PRODUCT_OUT="$LEAN_TARGET_DIR/$GUEST_TARGET/release"
    ;;
  *) echo "build-plugins: unsupported GUEST_TARGET=$GUEST_TARGET" >&2; exit 1 ;;
esac
OUT="$PLUGINS_TARGET_DIR/$GUEST_TARGET/release"

# 3. Componentize (wasip1) or validate + copy (wasip2, already a component).
#    The lean product plugins with `--adapter none`: on the wasip1 path a
#    preview1 import creeping back in (a `std::fs` call, a `println!`)
#    fails the build. (On the wasip2 path rustc has made the component,
#    adapter and all, and `--adapter none` only validates it.)
emit() { # <build dir> <crate artifact> <dist dir> <name> <adapter>
  mkdir -p "$3"
  "$COMPONENTIZE" "$1/$2.wasm" "$3/$4.wasm" --adapter "$5"
}
for p in "${PRODUCT[@]}"; do emit "$PRODUCT_OUT" "${p%%:*}" dist/plugins "${p##*:}" none; done
for p in "${TEST_ONLY[@]}"; do emit "$OUT" "${p%%:*}" dist/test-plugins "${p##*:}" reactor; done

# 4. The Python and JavaScript sample plugins: each is built by its own
#    build.sh (a project made from templates/python or templates/js), with
#    componentize-py / componentize-js + jco (pinned there) installed into
#    .cache/polyglot on first use (PyPI, npm) and reused offline afterwards.
#    An install or build failure fails this script. A plugin is rebuilt only
#    when its sources, its build.sh or wit/tool.wit changed (a stamp of their
#    hashes next to the output).
POLYGLOT=(py-csv js-json)
POLY_OUT="$PLUGINS_TARGET_DIR/polyglot"
mkdir -p "$POLY_OUT"
for p in "${POLYGLOT[@]}"; do
  stamp="$(cd "plugins/$p" && shopt -s nullglob && sha256sum build.sh ./*.py ./*.js ../../wit/tool.wit | sha256sum)"
  if [ -f "$POLY_OUT/$p.wasm" ] && [ "$(cat "$POLY_OUT/$p.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "build-plugins: $p up to date" >&2
  else
    echo "build-plugins: building $p (plugins/$p/build.sh)" >&2
    rm -f "$POLY_OUT/$p.stamp"
    WASM_MCP_TOOLCHAINS="$ROOT/.cache/polyglot" WASM_MCP_WIT="$ROOT/wit" \
      bash "plugins/$p/build.sh" "$POLY_OUT/$p.wasm"
    echo "$stamp" >"$POLY_OUT/$p.stamp"
  fi
  mkdir -p dist/samples
  "$COMPONENTIZE" "$POLY_OUT/$p.wasm" "dist/samples/$p.wasm"
done
