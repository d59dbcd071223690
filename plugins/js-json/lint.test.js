// Native tests of the JSON lint/format logic: node --test plugins/js-json
import { test } from "node:test";
import assert from "node:assert/strict";
import { lint, format } from "./lint.js";

const errorAt = (text) => {
  const r = lint(text);
  assert.equal(r.valid, false, text);
  const [{ line, column, message }] = r.errors;
  return { line, column, message };
};

test("valid JSON, formatted with indent 2, tokens kept verbatim", () => {
  const src = '{"a":[1.0,2e5,{}],"b":{"c":"\\u00e9"},"big":12345678901234567890}';
  const r = lint(src);
  assert.equal(r.valid, true);
  assert.equal(
    format(src, 2),
    '{\n  "a": [\n    1.0,\n    2e5,\n    {}\n  ],\n  "b": {\n    "c": "\\u00e9"\n  },\n  "big": 12345678901234567890\n}\n',
  );
  assert.equal(format(src, 0), '{"a":[1.0,2e5,{}],"b":{"c":"\\u00e9"},"big":12345678901234567890}');
});

test("scalars at the top level and empty containers", () => {
  for (const t of ["1", '"x"', "null", " [ ] ", "{}"]) assert.equal(lint(t).valid, true, t);
  assert.equal(format(" [ ] ", 4), "[]\n");
  assert.equal(format('{"a":[[]]}', 1), '{\n "a": [\n  []\n ]\n}\n');
});

test("errors carry line and column", () => {
  assert.deepEqual(errorAt('{\n  "a": 1,\n  "b": 2,\n}'), { line: 4, column: 1, message: "expected a string key, found `}`" });
  assert.deepEqual(errorAt('[1,\n 2 3]'), { line: 2, column: 4, message: "expected `,` or `]`, found `3`" });
  assert.equal(errorAt('{"a": tru}').message, "invalid literal or number `tru`");
  assert.equal(errorAt("[01]").message, "invalid literal or number `01`");
  assert.equal(errorAt('["a\\x"]').message, "invalid escape in string");
  assert.equal(errorAt('["a\tb"]').message, "control character in string (escape it)");
  assert.equal(errorAt('{"a": "b').message, "unterminated string");
  assert.equal(errorAt('{"a": 1').message, "unexpected end of input, expected `,` or `}`");
  assert.equal(errorAt("").message, "unexpected end of input, expected a value");
  assert.equal(errorAt("1 2").message, "expected the end of input, found `2`");
  assert.equal(errorAt("{'a': 1}").message, 'unexpected character "\'"');
  assert.equal(errorAt("[1,]").message, "expected a value, found `]`");
});

test("duplicate keys are warnings with positions", () => {
  const r = lint('{"a": 1,\n "a": 2, "b": {"a": 3}}');
  assert.equal(r.valid, true);
  assert.deepEqual(r.warnings.map((w) => [w.line, w.column, w.message]), [[2, 2, 'duplicate key "a"']]);
});

test("deep nesting needs no recursion", () => {
  const deep = "[".repeat(200000) + "]".repeat(200000);
  assert.equal(lint(deep).valid, true);
  assert.deepEqual(errorAt("[".repeat(200000)), { line: 1, column: 200001, message: "unexpected end of input, expected a value or `]`" });
});
