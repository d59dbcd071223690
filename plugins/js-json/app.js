// js-json as a component: the WIT glue and worktree I/O around lint.js
// (componentize-js). The export `tool` implements the `tool` interface of
// wit/tool.wit; the worktree is WASI's only preopen, `/`.
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import { lint, format } from "./lint.js";

const MAX_FILE_BYTES = 16 << 20; // larger files are refused with `too-large`
const MAX_PRETTY_BYTES = 1 << 20; // `pretty` text returned inline at most

const PATH = { type: "string", description: "JSON file, relative to the worktree root." };
const INDENT = { type: "integer", minimum: 0, maximum: 8, default: 2, description: "Spaces per level; 0 = compact." };
const FINDING = {
  type: "object",
  properties: { line: { type: "integer", minimum: 1 }, column: { type: "integer", minimum: 1 }, message: { type: "string" } },
  required: ["line", "column", "message"],
  additionalProperties: false,
};

const TOOLS = [
  {
    name: "json_lint",
    title: "Lint a JSON file",
    description:
      "Checks a JSON file in the worktree: reports the first syntax error with its line and column, warns about " +
      "duplicate keys, says whether the file is already formatted, and with `pretty` returns the formatted text " +
      "(numbers and escapes kept verbatim).",
    inputSchema: {
      type: "object",
      properties: { path: PATH, pretty: { type: "boolean", default: false }, indent: INDENT },
      required: ["path"],
      additionalProperties: false,
    },
    outputSchema: {
      type: "object",
      properties: {
        path: { type: "string" },
        valid: { type: "boolean" },
        errors: { type: "array", items: FINDING },
        warnings: { type: "array", items: FINDING },
        formatted: { type: "boolean", description: "The file equals its formatting with `indent` (valid files only)." },
        pretty: { type: "string" },
      },
      required: ["path", "valid", "errors", "warnings"],
      additionalProperties: false,
    },
    annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },
    run: jsonLint,
  },
  {
    name: "json_format",
    title: "Format a JSON file in place",
    description:
      "Rewrites a valid JSON file in the worktree with `indent` spaces per level (numbers and escapes kept " +
      "verbatim). An invalid file is left alone and reported with the line and column of its error.",
    inputSchema: {
      type: "object",
      properties: { path: PATH, indent: INDENT },
      required: ["path"],
      additionalProperties: false,
    },
    outputSchema: {
      type: "object",
      properties: { path: { type: "string" }, changed: { type: "boolean" }, bytes: { type: "integer", minimum: 0 } },
      required: ["path", "changed", "bytes"],
      additionalProperties: false,
    },
    annotations: { readOnly: false, destructive: true, idempotent: true, openWorld: false },
    run: jsonFormat,
  },
];

/** A tool error with a WIT `error-code` (`not-found`, ...). */
class ToolFailure extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// WASI filesystem error codes -> tool error codes.
const FS_CODES = {
  "no-entry": "not-found",
  access: "permission-denied",
  "not-permitted": "permission-denied",
  "read-only": "permission-denied",
  "is-directory": "invalid-arguments",
  "not-directory": "not-found",
  "insufficient-space": "too-large",
  "file-too-large": "too-large",
};

function fsCall(rel, what, f) {
  try {
    return f();
  } catch (e) {
    const code = typeof e?.payload === "string" ? e.payload : String(e);
    throw new ToolFailure(FS_CODES[code] ?? "io", `${rel}: ${what}: ${code}`);
  }
}

/** The worktree root and a model path relative to it (a leading `/` means
 * the root). `..` is left to the sandbox, which refuses escapes. */
function resolve(path) {
  const rel = path.replace(/^\/+/, "");
  if (!rel) throw new ToolFailure("invalid-arguments", "`path` must name a file in the worktree");
  const dirs = getDirectories();
  const root = (dirs.find(([, p]) => p === "/") ?? dirs[0])?.[0];
  if (!root) throw new ToolFailure("io", "no worktree is mounted");
  return { root, rel };
}

function readText(path) {
  const { root, rel } = resolve(path);
  const file = fsCall(rel, "open", () => root.openAt({ symlinkFollow: true }, rel, {}, { read: true }));
  const { type, size } = fsCall(rel, "stat", () => file.stat());
  if (type === "directory") throw new ToolFailure("invalid-arguments", `${rel}: is a directory`);
  if (size > BigInt(MAX_FILE_BYTES)) {
    throw new ToolFailure("too-large", `${rel}: ${size} bytes, over the ${MAX_FILE_BYTES}-byte limit`);
  }
  const chunks = [];
  for (let offset = 0n; ; ) {
    const [bytes, eof] = fsCall(rel, "read", () => file.read(BigInt(MAX_FILE_BYTES) + 1n - offset, offset));
    chunks.push(bytes);
    offset += BigInt(bytes.length);
    if (eof || bytes.length === 0) break;
    if (offset > BigInt(MAX_FILE_BYTES)) throw new ToolFailure("too-large", `${rel}: grew past the limit while reading`);
  }
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (all.set(c, at), at + c.length), 0);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(all);
  } catch {
    throw new ToolFailure("invalid-arguments", `${rel}: not UTF-8 text`);
  }
}

function writeText(path, text) {
  const { root, rel } = resolve(path);
  const bytes = new TextEncoder().encode(text);
  const file = fsCall(rel, "open", () =>
    root.openAt({ symlinkFollow: true }, rel, { truncate: true }, { write: true }),
  );
  for (let done = 0; done < bytes.length; ) {
    done += Number(fsCall(rel, "write", () => file.write(bytes.subarray(done), BigInt(done))));
  }
  return bytes.length;
}

const indentOf = (args) => args.indent ?? 2;

function jsonLint(args) {
  const text = readText(args.path);
  const { valid, errors, warnings } = lint(text);
  const out = { path: args.path, valid, errors: errors.map(plain), warnings: warnings.map(plain) };
  if (valid) {
    const pretty = format(text, indentOf(args));
    out.formatted = pretty === text;
    if (args.pretty) {
      if (pretty.length > MAX_PRETTY_BYTES) {
        throw new ToolFailure("too-large", `${args.path}: formatted text over ${MAX_PRETTY_BYTES} bytes; use json_format`);
      }
      out.pretty = pretty;
    }
  }
  return out;
}

function jsonFormat(args) {
  const text = readText(args.path);
  const { valid, errors } = lint(text);
  if (!valid) {
    const [{ line, column, message }] = errors;
    throw new ToolFailure("invalid-arguments", `${args.path}:${line}:${column}: ${message}; file left unchanged`);
  }
  const pretty = format(text, indentOf(args));
  if (pretty === text) return { path: args.path, changed: false, bytes: new TextEncoder().encode(text).length };
  return { path: args.path, changed: true, bytes: writeText(args.path, pretty) };
}

const plain = ({ line, column, message }) => ({ line, column, message });

function toolError(e) {
  if (e instanceof ToolFailure) return { code: e.code, message: e.message };
  return { code: "internal", message: `${e?.name ?? "Error"}: ${e?.message ?? e}` };
}

export const tool = {
  listTools() {
    return TOOLS.map(({ name, title, description, inputSchema, outputSchema, annotations }) => ({
      name,
      title,
      description,
      inputSchema: JSON.stringify(inputSchema),
      outputSchema: JSON.stringify(outputSchema),
      annotations,
    }));
  },

  call(name, argsJson) {
    const spec = TOOLS.find((t) => t.name === name);
    // componentize-js maps a thrown value to the `err` case of the result.
    if (!spec) throw { code: "unknown-tool", message: `unknown tool \`${name}\`` };
    try {
      return JSON.stringify(spec.run(JSON.parse(argsJson)));
    } catch (e) {
      throw toolError(e);
    }
  },
};
