#!/usr/bin/env bash
# Prints the workspace's cargo target directory (CARGO_TARGET_DIR and
# .cargo/config included: cargo itself says where).
set -euo pipefail
MANIFEST="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Cargo.toml"
cargo metadata --format-version 1 --no-deps --manifest-path "$MANIFEST" \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
