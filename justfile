# wasm-mcp-host task runner. `just --list` shows the recipes.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Build the tool plugins (WASI 0.2 components) into dist/.
plugins:
    bash scripts/build-plugins.sh

# Build the host binaries.
build: plugins
    cargo build --workspace --bins

# Create a worktree for a task, serve it over MCP, run the agent loop, clean up.
run-task task="tasks/sample.toml" *args="": build
    cargo run -q -p wasm-mcp-harness --bin wasm-agent -- run-task --policy policy/default.toml --task {{task}} {{args}}

# The whole test suite (what CI runs).
test: plugins
    cargo test --workspace --no-fail-fast
    cargo test --manifest-path plugins/Cargo.toml

# Benchmarks (release build): ours vs the Python FastMCP baseline, start-up, instantiation, concurrency.
bench *args="": plugins
    bash scripts/bench-baseline-venv.sh
    cargo run --release -p wasm-mcp-bench -- {{args}}
