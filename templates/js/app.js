// {{name}}: a wasm-mcp tool plugin in JavaScript (componentize-js).
//
// The export `tool` implements the `tool` interface of wit/tool.wit. Inside
// the component the task's worktree is the only filesystem: WASI's one
// preopened directory, `/`. Throwing `{ code, message }` returns a tool-error.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

// The tool is named after the project, so two scaffolded plugins never clash.
const LINE_COUNT = {
  name: "{{name}}",
  title: "Count lines",
  description: "Counts the lines of a file in the worktree.",
  inputSchema: JSON.stringify({
    type: "object",
    properties: { path: { type: "string", description: "File, relative to the worktree root." } },
    required: ["path"],
    additionalProperties: false,
  }),
  outputSchema: JSON.stringify({
    type: "object",
    properties: { path: { type: "string" }, lines: { type: "integer", minimum: 0 } },
    required: ["path", "lines"],
    additionalProperties: false,
  }),
  annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },
};

// WASI filesystem errors -> tool error codes.
const CODES = { "no-entry": "not-found", access: "permission-denied", "not-permitted": "permission-denied" };

function readFile(path) {
  const [[root]] = getDirectories();
  const rel = path.replace(/^\/+/, "");
  try {
    const file = root.openAt({ symlinkFollow: true }, rel, {}, { read: true });
    const chunks = [];
    for (let offset = 0n; ; ) {
      const [bytes, eof] = file.read(1n << 20n, offset);
      chunks.push(bytes);
      offset += BigInt(bytes.length);
      if (eof || bytes.length === 0) return chunks;
    }
  } catch (e) {
    const code = typeof e?.payload === "string" ? e.payload : String(e);
    throw { code: CODES[code] ?? "io", message: `${path}: ${code}` };
  }
}

function lineCount({ path }) {
  let lines = 0;
  for (const chunk of readFile(path)) for (const b of chunk) lines += b === 10;
  return { path, lines };
}

export const tool = {
  listTools() {
    return [LINE_COUNT];
  },
  call(name, argsJson) {
    if (name !== LINE_COUNT.name) throw { code: "unknown-tool", message: `unknown tool \`${name}\`` };
    // The host has validated the arguments against the input schema.
    try {
      return JSON.stringify(lineCount(JSON.parse(argsJson)));
    } catch (e) {
      if (typeof e?.code === "string") throw e; // already a tool error
      throw { code: "internal", message: String(e) }; // anything else would trap the call
    }
  },
};
