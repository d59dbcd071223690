"""Baseline for the benchmark: the same `read_file` tool as wasm-mcp's
workspace plugin, served by the official MCP Python SDK (FastMCP, stdio).

Semantics match plugins/workspace/src/tools.rs::read_file:
  * `path` is relative to the root given by --worktree; a leading `/`, empty
    and `.` components are dropped, `..` is resolved lexically and may not
    climb above the root; the resolved real path must stay under the root
    (symlinks included).
  * at most the first 2 MiB of the file are read; bytes that are not valid
    UTF-8 become U+FFFD;
  * lines split on "\n" only and keep their terminators; `offset` is the first
    0-based line, `line_limit` 1..=1000 (default 1000);
  * `total_lines` counts lines within the 2 MiB window, `truncated` is true when
    the cap or the line window cut the output.

Run: .venv/bin/python bench/baseline/read_file_server.py --worktree DIR
"""

from __future__ import annotations

import argparse
import os
from typing import Annotated

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_LINE_LIMIT = 1000


class FilePreview(BaseModel):
    path: str
    content: str
    start_line: int
    lines_returned: int
    total_lines: int
    size_bytes: int
    truncated: bool


def normalize(raw: str) -> str:
    if "\0" in raw:
        raise ValueError("invalid_arguments: path must not contain NUL bytes")
    parts: list[str] = []
    for c in raw.split("/"):
        if c in ("", "."):
            continue
        if c == "..":
            if not parts:
                raise PermissionError(f"permission_denied: path escapes the worktree: {raw}")
            parts.pop()
        else:
            parts.append(c)
    return "/".join(parts) if parts else "."


def preview(data: bytes, offset: int, line_limit: int, capped: bool) -> tuple[str, int, int, bool]:
    text = data.decode("utf-8", errors="replace")
    pieces = text.split("\n")
    # split() leaves the text after the last "\n" (possibly empty) at the end.
    last = pieces.pop()
    lines = [p + "\n" for p in pieces]
    if last:
        lines.append(last)
    total = len(lines)
    window = lines[offset : offset + line_limit] if offset < total else []
    truncated = capped or offset + len(window) < total
    return "".join(window), len(window), total, truncated


def build(root: str) -> FastMCP:
    root = os.path.realpath(root)
    if not os.path.isdir(root):
        raise SystemExit(f"worktree {root} is not a directory")
    # WARNING: like wasm-mcp under the benchmark (WASM_MCP_LOG=warn), no per-request log line.
    mcp = FastMCP("read-file-baseline", log_level="WARNING")

    @mcp.tool(
        name="read_file",
        title="Read file",
        description=(
            "Read a text file of the worktree, by lines. `path` is relative to the worktree root. "
            "Returns up to `line_limit` lines (default and maximum 1000) starting at line `offset` "
            "(0-based, default 0). At most the first 2 MiB of the file are read."
        ),
    )
    def read_file(
        path: Annotated[str, Field(description="File path, relative to the worktree root.")],
        offset: Annotated[int, Field(ge=0, description="First line to return, 0-based.")] = 0,
        line_limit: Annotated[
            int, Field(ge=1, le=MAX_LINE_LIMIT, description="Maximum number of lines to return.")
        ] = MAX_LINE_LIMIT,
    ) -> FilePreview:
        rel = normalize(path)
        full = os.path.realpath(root if rel == "." else os.path.join(root, rel))
        if full != root and not full.startswith(root + os.sep):
            raise PermissionError(f"permission_denied: path escapes the worktree: {path}")
        if os.path.isdir(full):
            raise ValueError(f"invalid_arguments: {rel} is a directory (use list_dir)")
        with open(full, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(MAX_FILE_BYTES + 1)
        capped = len(data) > MAX_FILE_BYTES
        data = data[:MAX_FILE_BYTES]
        content, returned, total, truncated = preview(data, offset, line_limit, capped)
        return FilePreview(
            path=rel,
            content=content,
            start_line=offset,
            lines_returned=returned,
            total_lines=total,
            size_bytes=max(size, len(data)),
            truncated=truncated,
        )

    return mcp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worktree", required=True, help="root directory that paths are relative to")
    args = ap.parse_args()
    build(args.worktree).run("stdio")


if __name__ == "__main__":
    main()
