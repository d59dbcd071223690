#!/usr/bin/env bash
# Usage: scripts/run-bin.sh [--release] NAME [ARGS...]
# Builds the workspace's binaries and runs one of them (exec: signals reach it).
# All of them, as `just build` does, and never `cargo run --bin NAME` or
# `-p`: those resolve features for one package, which here means another
# build of wasmtime and the host (minutes, ~1 GB), and a binary rebuilt
# under a running bench that spawns itself.
set -euo pipefail
MANIFEST="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Cargo.toml"
PROFILE=debug
FLAGS=()
if [ "${1:-}" = --release ]; then
  PROFILE=release
  FLAGS=(--release)
  shift
fi
NAME=${1:?usage: run-bin.sh [--release] NAME [ARGS...]}
shift
cargo build -q "${FLAGS[@]}" --manifest-path "$MANIFEST" --workspace --bins
TARGET=$(bash "$(dirname "${BASH_SOURCE[0]}")/target-dir.sh")
exec "$TARGET/$PROFILE/$NAME" "$@"
