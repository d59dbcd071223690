"""A third-party MCP server written with the official Python SDK (FastMCP),
used by harness/tests/third_party.rs. It works in its current directory,
which the harness policy sets to the task's worktree."""

from pathlib import Path

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("notes")


@mcp.tool()
def write_note(name: str, text: str) -> str:
    """Write a text file (relative to the working directory)."""
    path = Path.cwd() / name
    path.write_text(text)
    return f"wrote {len(text)} bytes to {name}"


@mcp.tool()
def read_note(name: str) -> str:
    """Read a text file (relative to the working directory)."""
    return (Path.cwd() / name).read_text()


if __name__ == "__main__":
    mcp.run()
