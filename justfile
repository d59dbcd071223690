# wasm-mcp-host task runner. `just --list` shows the recipes.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Build the tool plugins (WASI 0.2 components) into dist/.
plugins:
    bash scripts/build-plugins.sh

# Build the host binaries. Every cargo command here selects the whole workspace
# (`--workspace`; binaries run through scripts/run-bin.sh): with `-p` or
# `cargo run --bin` cargo resolves other features and builds wasmtime and the
# host again (a few minutes and ~1 GB each time).
build: plugins
    cargo build --workspace --bins

# Create a worktree for a task, serve it over MCP, run the agent loop, commit the
# work on branch agent/<run-id> (printed) and remove the worktree.
run-task task="tasks/sample.toml" *args="": build
    bash scripts/run-bin.sh wasm-agent run-task --policy policy/default.toml --task {{task}} {{args}}

# Commit the work a run left in its worktree when it did not finish (kill -9,
# out of memory, a crash) on its branch agent/<run-id>, and remove the worktree.
recover run *args="": build
    bash scripts/run-bin.sh wasm-agent recover {{run}} {{args}}

# Formatting and lints, both workspaces (CI runs this first).
lint:
    cargo fmt --all --check
    cargo fmt --manifest-path plugins/Cargo.toml --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --manifest-path plugins/Cargo.toml --all-targets -- -D warnings

# The whole test suite (what CI runs). Third-party MCP code first: .venv and
# .venv-mcp2 with the Python MCP SDK 1.x and 2.x, server-filesystem and the
# TypeScript SDK via npm (scripts/test-mcp-servers.sh). The official MCP
# conformance suite runs against `wasm-mcp serve --http` (scripts/conformance.sh).
test: plugins
    bash scripts/test-mcp-servers.sh
    cargo test --workspace --no-fail-fast
    bash scripts/conformance.sh
    cargo test --manifest-path plugins/Cargo.toml
    python3 -m unittest discover -s plugins/py-csv
    node --test plugins/js-json/lint.test.js
    cargo test --workspace --test load -- --ignored --nocapture

# Benchmarks (release build): ours vs a do-nothing floor and the Python FastMCP baseline; start-up,
# instantiation, concurrency, result sizes, servers at once, memory. `--only sizes,memory` picks sections.
# (Arguments passed as given: `--peer "PROGRAM ARGS"` stays one argument.)
[positional-arguments]
bench *args="": plugins
    bash scripts/bench-baseline-venv.sh
    bash scripts/run-bin.sh --release wasm-mcp-bench "$@"

# The bench with microsoft/wassette side by side (--peer; scripts/peer-wassette.sh builds it once, ~16 min).
[positional-arguments]
bench-peer *args="":
    bash scripts/peer-wassette.sh build
    just bench --peer "{{justfile_directory()}}/scripts/peer-wassette.sh serve {worktree} {worktree}.wassette" --peer-tool read-file --peer-absolute-paths "$@"

# Regenerate fuzz/workspace-tools.json from the built workspace plugin (`wasm-mcp tools`).
fuzz-schemas: plugins
    bash scripts/fuzz-schemas.sh

# A short bounded fuzz run of the JSON-RPC / argument / cursor path (cargo fuzz, libFuzzer).
fuzz seconds="20" target="jsonrpc_args": fuzz-schemas
    command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
    mkdir -p fuzz/corpus/{{target}}
    cd fuzz && mkdir -p target && RUSTC_BOOTSTRAP=1 cargo fuzz run {{target}} corpus/{{target}} seeds -- -max_total_time={{seconds}} -rss_limit_mb=2048 > target/fuzz.log 2>&1 || { tail -40 target/fuzz.log; echo "fuzz: {{target}} failed" >&2; exit 1; }
    grep -E '^Done [0-9]+ runs' fuzz/target/fuzz.log
