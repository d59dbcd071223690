"""Drives `wasm-mcp serve` with the official Python SDK, 1.x
(`ClientSession`, the 2025-11-25 handshake) or 2.x (`Client` in its default
mode: it probes `server/discover` and speaks 2026-07-28), over stdio or
Streamable HTTP.

usage: python_client.py PLUGIN_DIR NEW_PLUGIN -- COMMAND ARGS...   (stdio)
       python_client.py PLUGIN_DIR NEW_PLUGIN --url URL            (HTTP)

Over HTTP every request carries `Authorization: Bearer $MCP_TEST_TOKEN`.
The server must serve workspace.wasm and hostile.wasm from PLUGIN_DIR with
`--page-size 1 --max-concurrency 1 --watch-ms 100`. Checks, in order:
pagination, a call, an `isError` result, cancellation (a spinning tool is
cancelled and the single slot is free at once), hot reload (NEW_PLUGIN is
copied into PLUGIN_DIR and the tool list change must be heard). Prints one
`ok ...` line per check; exits non-zero on the first failure.
"""

import os
import shutil
import sys
import time
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path

import anyio

SDK = version("mcp")
MAJOR = int(SDK.split(".")[0])
TIMEOUT = 60


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL ({SDK}): {what}")


async def list_all(list_page):
    names, cursor, pages = [], None, 0
    while True:
        page = await list_page(cursor)
        pages += 1
        names += [t.name for t in page.tools]
        cursor = page.nextCursor if MAJOR < 2 else page.next_cursor
        if not cursor:
            return names, pages


async def common_checks(list_page, call_tool, cancel_spin):
    names, pages = await list_all(list_page)
    check({"read_file", "spin", "list_dir"} <= set(names), f"tools listed: {names}")
    check(pages == len(names), f"one tool per page: {pages} pages, {len(names)} tools")
    print(f"ok pagination: {len(names)} tools in {pages} pages")

    r = await call_tool("read_file", {"path": "hello.txt"})
    structured = r.structuredContent if MAJOR < 2 else r.structured_content
    check(not (r.isError if MAJOR < 2 else r.is_error), f"read_file failed: {r}")
    check(structured["content"] == "hello\n", f"read_file result: {structured}")
    print("ok call")

    r = await call_tool("read_file", {"path": "missing.txt"})
    check(r.isError if MAJOR < 2 else r.is_error, f"missing file is not isError: {r}")
    print("ok isError")

    # Cancel a spinning call. With one slot, the next call only runs if
    # the server stopped the guest and freed it.
    await cancel_spin()
    started = time.monotonic()
    r = await call_tool("read_file", {"path": "hello.txt"})
    took = time.monotonic() - started
    check(not (r.isError if MAJOR < 2 else r.is_error), f"slot not freed after cancel: {r}")
    check(took < 5, f"next call after cancel took {took:.2f}s")
    print(f"ok cancellation: next call answered in {took * 1000:.0f} ms")


async def hot_reload(plugin_dir, new_plugin, changed, list_page):
    before, _ = await list_all(list_page)
    shutil.copy(new_plugin, Path(plugin_dir) / Path(new_plugin).name)
    with anyio.fail_after(TIMEOUT):
        await changed()
    after, _ = await list_all(list_page)
    check(set(before) < set(after), f"tools after reload: {after} (before: {before})")
    print(f"ok list_changed: {len(before)} -> {len(after)} tools")


def http_client():
    """An httpx client sending the bearer token (the SDK's own defaults)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    token = os.environ["MCP_TEST_TOKEN"]
    return create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})


@asynccontextmanager
async def v1_streams(target):
    """(read, write) streams to the server: a spawned child or a URL."""
    kind, where = target
    if kind == "url":
        from mcp.client.streamable_http import streamable_http_client

        async with http_client() as http:
            async with streamable_http_client(where, http_client=http) as (read, write, _):
                yield read, write
    else:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=where[0], args=where[1:])
        async with stdio_client(params) as (read, write):
            yield read, write


def v2_server(target):
    """What SDK 2.x's `Client` connects to: stdio parameters or an HTTP transport."""
    kind, where = target
    if kind == "url":
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(where, http_client=http_client())
    from mcp import StdioServerParameters

    return StdioServerParameters(command=where[0], args=where[1:])


async def run_v1(plugin_dir, new_plugin, target):
    from mcp import ClientSession
    import mcp.types as types

    heard = anyio.Event()

    async def on_message(message):
        root = getattr(message, "root", None)
        if isinstance(root, types.ToolListChangedNotification):
            heard.set()

    async with v1_streams(target) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            print(f"ok initialize: protocol {init.protocolVersion}")
            list_page = lambda cursor: session.list_tools(cursor=cursor)

            async def cancel_spin():
                # SDK 1.x does not send notifications/cancelled when a call is
                # abandoned; a host does it itself, with the request's id.
                spin_id = session._request_id
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.call_tool, "spin", {})
                    # Time for the call to reach the server and start.
                    await anyio.sleep(1.5)
                    params = types.CancelledNotificationParams(requestId=spin_id, reason="test")
                    note = types.CancelledNotification(method="notifications/cancelled", params=params)
                    await session.send_notification(types.ClientNotification(note))
                    tg.cancel_scope.cancel()

            await common_checks(list_page, session.call_tool, cancel_spin)
            await hot_reload(plugin_dir, new_plugin, heard.wait, list_page)


async def run_v2(plugin_dir, new_plugin, target):
    from mcp import Client

    async with Client(v2_server(target)) as client:
        negotiated = client.session.protocol_version
        print(f"ok connect: protocol {negotiated}")
        check(negotiated == "2026-07-28", f"default mode negotiated {negotiated}")
        list_page = lambda cursor: client.list_tools(cursor=cursor, cache_mode="refresh")

        async def cancel_spin():
            # Abandoning the call (anyio cancellation) makes SDK 2.x send
            # notifications/cancelled.
            with anyio.move_on_after(1.5):
                await client.call_tool("spin", {})
                check(False, "spin returned")

        await common_checks(list_page, client.call_tool, cancel_spin)
        async with client.listen(tools_list_changed=True) as sub:
            check(sub.honored.tools_list_changed, f"listen not honored: {sub.honored}")

            async def changed():
                event = await sub.__anext__()
                print(f"ok event: {type(event).__name__}")

            await hot_reload(plugin_dir, new_plugin, changed, list_page)


def main():
    plugin_dir, new_plugin, how, *rest = sys.argv[1:]
    target = ("url", rest[0]) if how == "--url" else ("command", rest)
    run = run_v1 if MAJOR < 2 else run_v2
    anyio.run(run, plugin_dir, new_plugin, target)
    print(f"PASS python mcp {SDK} over {target[0]}")


if __name__ == "__main__":
    main()
