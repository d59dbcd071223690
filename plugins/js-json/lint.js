// JSON linting and formatting as plain JavaScript (no WASI), shared by the
// component glue (app.js) and the native tests (`node --test plugins/js-json`).
//
// A small iterative parser (no recursion, so any nesting depth is fine) that
// reports the first syntax error with its line and column, warns about
// duplicate object keys (JSON.parse silently keeps the last one), and keeps
// every token's text, so formatting never changes a number or a string
// escape (JSON.parse + stringify would turn 1.0 into 1 and round big integers).

/** A syntax error or warning at a 1-based line and column (UTF-16 units). */
export class Finding {
  constructor(text, offset, message) {
    const before = text.slice(0, offset);
    const lineStart = before.lastIndexOf("\n") + 1;
    this.line = (before.match(/\n/g)?.length ?? 0) + 1;
    this.column = offset - lineStart + 1;
    this.message = message;
  }
}

class SyntaxFailure extends Error {
  constructor(offset, message) {
    super(message);
    this.offset = offset;
  }
}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const WORD = /[-+0-9A-Za-z.]+/y;
const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$/;
const SPACE = /[ \t\n\r]*/y;
const MAX_WARNINGS = 100;

/** Reads `text` one token at a time without allocating: `next()` returns
 * the kind (a punctuator, `string`, `scalar` for numbers, true, false and
 * null, or `end`) and leaves the token at `text.slice(start, end)`. */
class Lexer {
  constructor(text) {
    this.text = text;
    this.start = this.end = text.startsWith("\uFEFF") ? 1 : 0;
  }

  token() {
    return this.text.slice(this.start, this.end);
  }

  next() {
    SPACE.lastIndex = this.end;
    SPACE.test(this.text);
    const offset = (this.start = this.end = SPACE.lastIndex);
    if (offset >= this.text.length) return "end";
    const c = this.text[offset];
    if ("{}[]:,".includes(c)) {
      this.end++;
      return c;
    }
    const re = c === '"' ? STRING : WORD;
    re.lastIndex = offset;
    if (!re.test(this.text)) {
      if (c === '"') this.stringError(offset);
      throw new SyntaxFailure(offset, `unexpected character ${JSON.stringify(c)}`);
    }
    this.end = re.lastIndex;
    if (c === '"') return "string";
    const word = this.token();
    if (!NUMBER.test(word) && word !== "true" && word !== "false" && word !== "null") {
      throw new SyntaxFailure(offset, `invalid literal or number \`${word.slice(0, 40)}\``);
    }
    return "scalar";
  }

  /** Throws what is wrong with the string starting at `offset`. */
  stringError(offset) {
    for (let i = offset + 1; i < this.text.length; i++) {
      const c = this.text.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) throw new SyntaxFailure(i, "control character in string (escape it)");
      if (c === 0x5c) {
        if (!/^(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/.test(this.text.slice(i + 1, i + 6))) {
          throw new SyntaxFailure(i, "invalid escape in string");
        }
        i++;
      }
    }
    throw new SyntaxFailure(offset, "unterminated string");
  }
}

const CLOSE = { "{": "}", "[": "]" };

/** Checks `text`: returns the duplicate-key warnings, or throws a SyntaxFailure. */
function scan(text) {
  const lexer = new Lexer(text);
  const warnings = [];
  const stack = []; // open containers: { open, keys }
  // what the next token must be: value | value-or-close | key | key-or-close | colon | after | end
  let want = "value";
  const expected = (kind, what) =>
    new SyntaxFailure(
      lexer.start,
      kind === "end" ? `unexpected end of input, expected ${what}` : `expected ${what}, found \`${lexer.token().slice(0, 40)}\``,
    );
  for (;;) {
    const kind = lexer.next();
    const top = stack[stack.length - 1];
    if ((want === "value-or-close" || want === "key-or-close") && kind === CLOSE[top.open]) {
      stack.pop();
      want = stack.length ? "after" : "end";
      continue;
    }
    switch (want) {
      case "value":
      case "value-or-close":
        if (kind === "{" || kind === "[") {
          stack.push({ open: kind, keys: kind === "{" ? new Set() : null });
          want = kind === "{" ? "key-or-close" : "value-or-close";
        } else if (kind === "string" || kind === "scalar") {
          want = stack.length ? "after" : "end";
        } else throw expected(kind, want === "value" ? "a value" : "a value or `]`");
        break;
      case "key":
      case "key-or-close":
        if (kind !== "string") throw expected(kind, want === "key" ? "a string key" : "a string key or `}`");
        const key = lexer.token();
        if (top.keys.has(key) && warnings.length < MAX_WARNINGS) {
          warnings.push(new Finding(text, lexer.start, `duplicate key ${key.slice(0, 80)}`));
        }
        top.keys.add(key);
        want = "colon";
        break;
      case "colon":
        if (kind !== ":") throw expected(kind, "`:`");
        want = "value";
        break;
      case "after":
        if (kind === ",") want = top.open === "{" ? "key" : "value";
        else if (kind === CLOSE[top.open]) {
          stack.pop();
          want = stack.length ? "after" : "end";
        } else throw expected(kind, `\`,\` or \`${CLOSE[top.open]}\``);
        break;
      case "end":
        if (kind !== "end") throw expected(kind, "the end of input");
        return warnings;
    }
  }
}

/** Lints `text`: `{ valid, errors, warnings }` (errors: 0 or 1 Finding). */
export function lint(text) {
  try {
    return { valid: true, errors: [], warnings: scan(text) };
  } catch (e) {
    if (!(e instanceof SyntaxFailure)) throw e;
    return { valid: false, errors: [new Finding(text, e.offset, e.message)], warnings: [] };
  }
}

/** Re-emits valid JSON `text` (checked by `lint`) with `indent` spaces per
 * level (0: compact, one line), tokens verbatim; a trailing newline unless
 * compact. */
export function format(text, indent) {
  const lexer = new Lexer(text);
  const out = [];
  const pad = (depth) => (indent ? "\n" + " ".repeat(indent * depth) : "");
  let depth = 0;
  let open = null; // a `{` or `[` not yet emitted: `{}` and `[]` stay on one line
  for (let kind = lexer.next(); kind !== "end"; kind = lexer.next()) {
    if (open) {
      out.push(open, kind === CLOSE[open] ? "" : pad(++depth));
      if (kind === CLOSE[open]) {
        out.push(kind);
        open = null;
        continue;
      }
      open = null;
    }
    if (kind === "{" || kind === "[") open = kind;
    else if (kind === "}" || kind === "]") out.push(pad(--depth), kind);
    else if (kind === ",") out.push(",", pad(depth));
    else if (kind === ":") out.push(indent ? ": " : ":");
    else out.push(lexer.token());
  }
  if (open) out.push(open); // unreachable for valid JSON
  if (indent) out.push("\n");
  return out.join("");
}
