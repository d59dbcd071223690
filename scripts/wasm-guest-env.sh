#!/usr/bin/env bash
# Source this (`. scripts/wasm-guest-env.sh`) to build Rust guests for
# wasm32-wasip1 on a machine whose rustup cannot download a wasm target.
#
# Recipe (verified with wasmtime 48's WASI 0.2 host):
#   1. Debian's rustc-web (/usr/bin/rustc, 1.96) plus its library source
#      (rust-web-src) compiles std for wasm32-wasip1 from source with
#      `-Zbuild-std=std,panic_abort` (RUSTC_BOOTSTRAP=1 unlocks -Z).
#   2. Debian's wasi-libc supplies libc.a and crt1-*.o; it is symlinked into
#      the place rustc expects a target's self-contained objects.
#   3. rustup's own rust-lld links.
#   4. The core module is then turned into a component with the wasi
#      preview1 adapter (tools/componentize, REACTOR adapter for a library
#      world such as `tool-plugin`).
# Do NOT build --target wasm32-wasip2 with this toolchain: it links, but
# Debian's 2022 wasi-libc never sees the preopens (every open fails with
# ENOTCAPABLE). Where `rustup target list --installed` shows wasm32-wasip2,
# none of this is needed: use `cargo build --target wasm32-wasip2`.
#
# Idempotent. Installs the apt packages only when missing (needs root or
# sudo). Exports RUSTC, RUSTC_BOOTSTRAP and CARGO_TARGET_WASM32_WASIP1_LINKER
# into the sourcing shell, so source it in a subshell if the same shell also
# builds native code with the rustup toolchain. Does not change the caller's
# shell options; returns non-zero on failure.

_wge_main() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  fi
  if ! [ -x /usr/bin/rustc ] || ! [ -d /usr/lib/rustlib/src/rust/library ] \
     || ! [ -f /usr/lib/wasm32-wasi/libc.a ]; then
    echo "wasm-guest-env: installing rustc-web rust-web-src wasi-libc (apt)" >&2
    $sudo apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      rustc-web rust-web-src wasi-libc >/dev/null || return 1
  fi
  local sc=/usr/lib/rustlib/wasm32-wasip1/lib/self-contained
  if ! [ -e "$sc/libc.a" ]; then
    $sudo mkdir -p "$sc" && $sudo ln -sf /usr/lib/wasm32-wasi/* "$sc/" || return 1
  fi
  local rustup_rustc hostbin
  rustup_rustc="$(rustup which rustc 2>/dev/null)" || {
    echo "wasm-guest-env: rustup not found (needed for rust-lld)" >&2; return 1; }
  hostbin="$(dirname "$rustup_rustc")/../lib/rustlib/x86_64-unknown-linux-gnu/bin"
  if ! [ -x "$hostbin/rust-lld" ]; then
    echo "wasm-guest-env: no rust-lld under $hostbin" >&2; return 1
  fi
  export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
  CARGO_TARGET_WASM32_WASIP1_LINKER="$(cd "$hostbin" && pwd)/rust-lld"
  export CARGO_TARGET_WASM32_WASIP1_LINKER
}
_wge_main
_wge_rc=$?
unset -f _wge_main
# then: cargo build --release --target wasm32-wasip1 -Zbuild-std=std,panic_abort
#       and componentize the .wasm with the preview1 reactor adapter.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return $_wge_rc; else exit $_wge_rc; fi
