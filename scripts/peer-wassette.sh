#!/usr/bin/env bash
# microsoft/wassette as a peer host for `just bench --peer` (issue #14, item 4).
#
#   scripts/peer-wassette.sh build
#       Builds, once, into .cache/peer/wassette-<tag>/:
#         bin/wassette      wassette at the pinned commit (`cargo build --release
#                           --locked`, its crates from the registry; ~16 min on 2 cores)
#         filesystem.wasm   its examples/filesystem-rs (read-file, list-directory, ...),
#                           built like our guests (scripts/wasm-guest-env.sh:
#                           wasm32-wasip1 + -Zbuild-std, then the preview1 reactor
#                           adapter via tools/componentize), or plainly for
#                           wasm32-wasip2 where rustup has that target.
#       Prints the bench arguments. Source: $WASSETTE_SRC (an existing checkout at
#       the pinned commit) or a clone of $WASSETTE_GIT (default: the public
#       repository). $WASSETTE_TARGET_DIR overrides cargo's target dir for wassette.
#   scripts/peer-wassette.sh serve WORKTREE PLUGIN_DIR
#       Writes PLUGIN_DIR (created; must not exist yet, or be one this script made):
#       filesystem.wasm and filesystem.policy.yaml granting read access to exactly
#       WORKTREE (`fs://<absolute path>`), then execs `wassette serve --stdio
#       --plugin-dir PLUGIN_DIR`. exec, not a child: wassette in stdio mode only
#       exits on SIGINT/SIGTERM, and the bench's client must be able to end it.
#       The bench passes {worktree}.wassette as PLUGIN_DIR: inside its temp dir,
#       removed with it.
#   scripts/peer-wassette.sh args
#       Prints the bench arguments (--peer ... --peer-tool ... --peer-absolute-paths).
#
# The guest preopens the granted directory under its absolute host path, so the
# bench must send absolute paths (--peer-absolute-paths). The tool is `read-file`
# (the WIT export name; wassette lists world-level functions by that name).
set -euo pipefail

WASSETTE_TAG=v0.2.0
WASSETTE_COMMIT=7b0053bea3f0e71480b6e1dd9e89801dc9bb2f19
WASSETTE_GIT="${WASSETTE_GIT:-https://github.com/microsoft/wassette}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/peer/wassette-$WASSETTE_TAG"
BIN="$CACHE/bin/wassette"
COMPONENT="$CACHE/filesystem.wasm"
MARK=".peer-wassette"  # marks a plugin dir this script wrote

die() { echo "peer-wassette: $*" >&2; exit 1; }

# The source checkout at the pinned commit (path on stdout).
source_dir() {
  local src="${WASSETTE_SRC:-$CACHE/src}"
  if [ -z "${WASSETTE_SRC:-}" ] && ! [ -d "$src/.git" ]; then
    echo "peer-wassette: cloning $WASSETTE_GIT" >&2
    rm -rf "$src"
    git clone -q --no-checkout "$WASSETTE_GIT" "$src" >&2
    # The example .wasm binaries in the tree are not needed (and not every
    # mirror carries their blobs).
    git -C "$src" sparse-checkout set --no-cone '/*' '!*.wasm' >&2
    git -C "$src" checkout -q --detach "$WASSETTE_COMMIT" >&2
  fi
  local head
  head="$(git -C "$src" rev-parse HEAD 2>/dev/null)" || die "$src is not a git checkout"
  [ "$head" = "$WASSETTE_COMMIT" ] \
    || die "$src is at $head, not the pinned $WASSETTE_COMMIT ($WASSETTE_TAG)"
  echo "$src"
}

build_host() { # <src>
  [ -x "$BIN" ] && return 0
  local target="${WASSETTE_TARGET_DIR:-$CACHE/target}"
  echo "peer-wassette: building wassette $WASSETTE_TAG (release, --locked; ~16 min)" >&2
  ( cd "$1" && CARGO_INCREMENTAL=0 CARGO_TARGET_DIR="$target" \
      nice -n 10 cargo build -q --release --locked --bin wassette )
  mkdir -p "$(dirname "$BIN")"
  cp "$target/release/wassette" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
}

build_component() { # <src>
  [ -f "$COMPONENT" ] && return 0
  local example="$1/examples/filesystem-rs" target="$CACHE/guest-target" guest
  if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    guest=wasm32-wasip2
    ( cd "$example" && cargo build -q --release --locked --target "$guest" \
        --target-dir "$target" )
  else
    guest=wasm32-wasip1
    ( . "$ROOT/scripts/wasm-guest-env.sh" && cd "$example" \
      && cargo build -q --release --locked --target "$guest" \
           -Zbuild-std=std,panic_abort --target-dir "$target" )
  fi
  ( cd "$ROOT" && cargo build -q -p componentize )
  local componentize
  componentize="$(bash "$ROOT/scripts/target-dir.sh")/debug/componentize"
  "$componentize" "$target/$guest/release/filesystem.wasm" "$COMPONENT" \
    --adapter reactor --export "func read-file"
}

bench_args() {
  echo "--peer \"$ROOT/scripts/peer-wassette.sh serve {worktree} {worktree}.wassette\"" \
       "--peer-tool read-file --peer-absolute-paths"
}

serve() { # <worktree> <plugin dir>
  [ $# -eq 2 ] || die "usage: serve WORKTREE PLUGIN_DIR"
  [ -x "$BIN" ] && [ -f "$COMPONENT" ] || die "not built: run scripts/peer-wassette.sh build"
  local worktree plugins="$2"
  worktree="$(cd "$1" && pwd -P)" || die "no worktree $1"
  if [ -e "$plugins" ] && ! [ -f "$plugins/$MARK" ]; then
    die "$plugins exists and was not made by this script"
  fi
  mkdir -p "$plugins"
  : > "$plugins/$MARK"
  cp "$COMPONENT" "$plugins/filesystem.wasm"
  # YAML double-quoted scalar: escape backslashes and quotes in the path.
  local uri="fs://${worktree//\\/\\\\}"
  uri="${uri//\"/\\\"}"
  cat > "$plugins/filesystem.policy.yaml" <<EOF
version: "1.0"
description: "wasm-mcp bench: read access to the bench worktree only"
permissions:
  storage:
    allow:
      - uri: "$uri"
        access: ["read"]
EOF
  exec "$BIN" serve --stdio --plugin-dir "$plugins"
}

case "${1:-build}" in
  build)
    if ! [ -x "$BIN" ] || ! [ -f "$COMPONENT" ]; then
      src="$(source_dir)"
      build_host "$src"
      build_component "$src"
    fi
    echo "peer-wassette: $BIN ($WASSETTE_TAG, $WASSETTE_COMMIT)" >&2
    bench_args
    ;;
  serve) shift; serve "$@" ;;
  args) bench_args ;;
  *) die "usage: $0 [build | serve WORKTREE PLUGIN_DIR | args]" ;;
esac
