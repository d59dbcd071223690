// Drives `wasm-mcp serve` with the official TypeScript SDK
// (@modelcontextprotocol/sdk, the 2025-11-25 handshake), over stdio or
// Streamable HTTP.
//
// usage: node ts_client.mjs SDK_DIR PLUGIN_DIR NEW_PLUGIN -- COMMAND ARGS...   (stdio)
//        node ts_client.mjs SDK_DIR PLUGIN_DIR NEW_PLUGIN --url URL            (HTTP)
//
// Over HTTP every request carries `Authorization: Bearer $MCP_TEST_TOKEN`.
// Same checks as python_client.py: pagination, a call, an `isError` result,
// cancellation (an aborted call sends notifications/cancelled; the single
// slot must be free at once), hot reload (`notifications/tools/list_changed`
// after NEW_PLUGIN is copied into PLUGIN_DIR).
import { copyFileSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, pluginDir, newPlugin, how, ...rest] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(join(sdkDir, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { ToolListChangedNotificationSchema } = await sdk("types.js");

// The one place the transports differ.
async function transportFor(how, rest) {
  if (how === "--url") {
    const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
    const headers = { Authorization: `Bearer ${process.env.MCP_TEST_TOKEN}` };
    return new StreamableHTTPClientTransport(new URL(rest[0]), { requestInit: { headers } });
  }
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const [command, ...commandArgs] = rest;
  return new StdioClientTransport({ command, args: commandArgs, stderr: "inherit" });
}

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL (ts sdk): ${what}`);
    process.exit(1);
  }
}

async function listAll(client) {
  const names = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    pages += 1;
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  return { names, pages };
}

const client = new Client({ name: "wasm-mcp-tests-ts", version: "0" });
let heard;
const changed = new Promise((resolve) => (heard = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => heard());
await client.connect(await transportFor(how, rest));
console.log(`ok initialize: server ${client.getServerVersion()?.name}`);

const before = await listAll(client);
check(["read_file", "spin", "list_dir"].every((n) => before.names.includes(n)), `tools: ${before.names}`);
check(before.pages === before.names.length, `one tool per page: ${before.pages} pages`);
console.log(`ok pagination: ${before.names.length} tools in ${before.pages} pages`);

let r = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
check(!r.isError && r.structuredContent?.content === "hello\n", `read_file: ${JSON.stringify(r)}`);
console.log("ok call");

r = await client.callTool({ name: "read_file", arguments: { path: "missing.txt" } });
check(r.isError === true, `missing file is not isError: ${JSON.stringify(r)}`);
console.log("ok isError");

const abort = new AbortController();
const spin = client.callTool({ name: "spin", arguments: {} }, undefined, { signal: abort.signal });
// Time for the call to reach the server and start (over HTTP the cancel
// is a request of its own, and could arrive first).
await new Promise((res) => setTimeout(res, 1500));
abort.abort("test");
await spin.then(
  () => check(false, "spin returned"),
  () => {},
);
const started = Date.now();
r = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
const took = Date.now() - started;
check(!r.isError, `slot not freed after cancel: ${JSON.stringify(r)}`);
check(took < 5000, `next call after cancel took ${took} ms`);
console.log(`ok cancellation: next call answered in ${took} ms`);

copyFileSync(newPlugin, join(pluginDir, basename(newPlugin)));
const timeout = setTimeout(() => check(false, "no list_changed within 60 s"), 60000);
await changed;
clearTimeout(timeout);
const after = await listAll(client);
check(after.names.length > before.names.length, `tools after reload: ${after.names}`);
console.log(`ok list_changed: ${before.names.length} -> ${after.names.length} tools`);
await client.close();
console.log(`PASS typescript sdk over ${how === "--url" ? "url" : "stdio"}`);
