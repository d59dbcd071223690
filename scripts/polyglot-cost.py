#!/usr/bin/env python3
"""What a tool costs per language: the Rust `workspace` plugin vs the Python
(`py-csv`) and JavaScript (`js-json`) samples, each served alone by the real
`wasm-mcp serve` over stdio.

Per plugin: component size; cold start (spawn -> first tools/list answer with
an empty --cache-dir: Cranelift compiles the component); warm start (same,
cache filled: deserializes); p50/p90 of a small tools/call over one
connection (fresh instance per call); the smallest --memory-mb (in MiB steps)
at which it loads and answers that call. Every call result is checked.

    python3 scripts/polyglot-cost.py [--server target/release/wasm-mcp] [--calls 200]

Run by scripts/polyglot-cost.sh after `just plugins`. Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# plugin file, tool, arguments, a check of the structured result
CASES = [
    ("plugins/workspace.wasm", "read_file", {"path": "small.txt"}, lambda r: r["content"].startswith("line 0")),
    ("samples/py-csv.wasm", "csv_summary", {"path": "small.csv"}, lambda r: r["row_count"] == 5),
    ("samples/js-json.wasm", "json_lint", {"path": "small.json"}, lambda r: r["valid"] is True),
]


def make_worktree(path):
    os.makedirs(path)
    with open(os.path.join(path, "small.txt"), "w") as f:
        f.writelines(f"line {i} of a small text file\n" for i in range(32))
    with open(os.path.join(path, "small.csv"), "w") as f:
        f.write("id,price,name\n" + "".join(f"{i},{i * 1.5},n{i}\n" for i in range(5)))
    with open(os.path.join(path, "small.json"), "w") as f:
        json.dump({"items": [{"id": i, "tags": ["a", "b"]} for i in range(20)]}, f, indent=2)


class Server:
    """`wasm-mcp serve` on a plugin dir, spoken to with newline-delimited JSON-RPC."""

    def __init__(self, server, worktree, plugins, cache, extra=()):
        self.proc = subprocess.Popen(
            [server, "serve", "--worktree", worktree, "--plugins", plugins, "--cache-dir", cache,
             "--watch-ms", "0", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "WASM_MCP_LOG": "warn"}, text=True, bufsize=1)
        self.next_id = 0

    def request(self, method, params):
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed stdout during {method}")
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def start(self):
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "polyglot-cost", "version": "0"}})
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        return self.request("tools/list", {})["tools"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def start_ms(args, worktree, plugins, cache):
    t = time.perf_counter()
    s = Server(args.server, worktree, plugins, cache)
    tools = s.start()
    ms = (time.perf_counter() - t) * 1000
    s.close()
    if not tools:
        raise RuntimeError(f"{plugins}: no tools listed")
    return ms


def call_ms(args, worktree, plugins, cache, tool, targs, check, n):
    s = Server(args.server, worktree, plugins, cache)
    s.start()
    samples = []
    for i in range(n + max(5, n // 10)):
        t = time.perf_counter()
        r = s.request("tools/call", {"name": tool, "arguments": targs})
        ms = (time.perf_counter() - t) * 1000
        if r.get("isError") or not check(r["structuredContent"]):
            raise RuntimeError(f"{tool}: unexpected result {json.dumps(r)[:300]}")
        if i >= max(5, n // 10):  # warm-up excluded
            samples.append(ms)
    s.close()
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.9)]


def min_memory_mb(args, worktree, plugins, cache, tool, targs):
    """Smallest --memory-mb (bisected, 1 MiB steps, from 16: below a module's
    initial memory the host refuses the cached code and recompiles) where
    `wasm-mcp call` succeeds; 16 means 16 or less."""
    def ok(mb):
        p = subprocess.run(
            [args.server, "call", "--worktree", worktree, "--plugins", plugins, "--cache-dir", cache,
             "--memory-mb", str(mb), tool, json.dumps(targs)],
            capture_output=True, text=True, env={**os.environ, "WASM_MCP_LOG": "error"})
        return p.returncode == 0 and '"isError": true' not in p.stdout and '"isError":true' not in p.stdout
    lo, hi = 16, 256
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.path.join(ROOT, "target/release/wasm-mcp"))
    ap.add_argument("--dist", default=os.path.join(ROOT, "dist"), help="where plugins/ and samples/ are")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warm-reps", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="polyglot-cost-") as tmp:
        worktree = os.path.join(tmp, "wt")
        make_worktree(worktree)
        print(f"server: {args.server}")
        print(f"{'plugin':<16}{'size MB':>9}{'cold start ms':>15}{'warm start ms':>15}"
              f"{'call p50 ms':>13}{'call p90 ms':>13}{'min MiB':>9}")
        for plugin, tool, targs, check in CASES:
            src = os.path.join(args.dist, plugin)
            name = os.path.basename(plugin)[:-5]
            plugins = os.path.join(tmp, "plugins-" + name)
            os.makedirs(plugins)
            shutil.copy(src, plugins)
            cache = os.path.join(tmp, "cache-" + name)
            cold = start_ms(args, worktree, plugins, cache)
            warm = statistics.median(start_ms(args, worktree, plugins, cache) for _ in range(args.warm_reps))
            p50, p90 = call_ms(args, worktree, plugins, cache, tool, targs, check, args.calls)
            mem = min_memory_mb(args, worktree, plugins, cache, tool, targs)
            size = os.path.getsize(src) / 1e6
            print(f"{name:<16}{size:>9.1f}{cold:>15.0f}{warm:>15.1f}{p50:>13.2f}{p90:>13.2f}{mem or '>256':>9}",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
