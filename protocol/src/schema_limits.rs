//! Static limits on JSON Schemas supplied by tools (a plugin's descriptors on
//! the server, a server's `tools/list` in the harness), checked before a
//! schema is compiled so that validating against it stays cheap.
//!
//! Validation cost grows with the schema *as expanded*: every `$ref` is
//! replaced by its target, so a chain of `anyOf: [{$ref next}, {$ref next}]`
//! doubles per link (40 links = 2^40 subschemas, one call frozen for good).
//! [`check_schema`] computes that expanded size statically (memoized per
//! `$ref` target, linear in the schema) and refuses above a bound. `$ref`
//! cycles (recursive schemas) are refused: with any fan-out their cost is
//! exponential in the instance's depth, which no static bound can cap.
//! Only local references (`#…`) are allowed.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Bounds on one schema; the defaults are what server and harness apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Bytes of schema text, as supplied and as re-serialized (compact).
    pub max_bytes: usize,
    /// Nesting depth of the schema's JSON (objects and arrays).
    pub max_depth: usize,
    /// Subschemas written in the schema (`$defs` included).
    pub max_subschemas: usize,
    /// Subschemas after expanding every `$ref` (the validation cost per
    /// instance node).
    pub max_expanded: u64,
    /// `$ref` hops followed in a row (`a → b → c …`).
    pub max_ref_depth: usize,
    /// Regular expressions (`pattern` values, `patternProperties` keys):
    /// each is compiled when the schema is, a plain one at up to ~20 ms
    /// under [`PATTERN_SIZE_LIMIT`] (distinct ones are not cached), so their
    /// count bounds the compile of plain patterns. Not yet bounded: lookahead
    /// chains jsonschema compiles part by part, and patterns reached only
    /// through `$ref` (README, schemas row).
    pub max_patterns: usize,
}

/// Compiled size at most one schema regex may take (the regex engine's
/// `size_limit`; its own default is 10 MiB): `[\s\S]{10000}` took ~60 ms
/// to compile under the default and is refused in ~2 ms under this, while
/// `^[\p{L}\p{N}_-]{1,64}$` (~20 ms) still compiles.
pub const PATTERN_SIZE_LIMIT: usize = 4 << 20;

/// Default cap on one schema's text: 64 KiB. A `tools/list` page of 50
/// tools with two such schemas each stays well under a 16 MiB frame.
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 64 << 10;

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_bytes: DEFAULT_MAX_SCHEMA_BYTES,
            max_depth: 32,
            max_subschemas: 2_000,
            max_expanded: 10_000,
            max_ref_depth: 64,
            max_patterns: 64,
        }
    }
}

/// Why a schema was refused; the message names the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaLimitError {
    #[error("schema is {size} bytes, over the {limit}-byte schema size limit")]
    TooLarge { size: usize, limit: usize },
    #[error("schema nests deeper than the depth limit of {limit}")]
    TooDeep { limit: usize },
    #[error("schema has more than {limit} subschemas (subschema limit)")]
    TooManySubschemas { limit: usize },
    #[error("schema expands to more than {limit} subschemas once `$ref`s are followed ($ref expansion limit)")]
    ExpansionTooLarge { limit: u64 },
    #[error("`$ref` chain longer than the limit of {limit} hops")]
    RefChainTooLong { limit: usize },
    #[error("`$ref` cycle through {at:?}: recursive schemas are not accepted")]
    RefCycle { at: String },
    #[error(
        "`$ref` {reference:?} is not local: only `#…` references within the schema are accepted"
    )]
    RemoteRef { reference: String },
    #[error("`$ref` {reference:?} points to nothing in the schema")]
    DanglingRef { reference: String },
    #[error("`{keyword}` is not accepted (only plain local `$ref`)")]
    UnsupportedKeyword { keyword: &'static str },
    #[error("schema has more than {limit} regular expressions (`pattern`, `patternProperties`; regex limit)")]
    TooManyPatterns { limit: usize },
    #[error("schema has {count} regular expressions (`pattern`, `patternProperties`), over the {left} left of its plugin's regex budget")]
    PatternBudget { count: usize, left: usize },
}

/// What the check measured (the expanded size prices validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaStats {
    pub subschemas: usize,
    pub expanded: u64,
    /// Regular expressions the compile will build.
    pub patterns: usize,
}

/// Check schema text that is about to be parsed (cheap size check first).
pub fn check_schema_text(text: &str, limits: &SchemaLimits) -> Result<(), SchemaLimitError> {
    check_size(text.len(), limits)
}

/// Check a parsed schema against every limit.
pub fn check_schema(
    schema: &Value,
    limits: &SchemaLimits,
) -> Result<SchemaStats, SchemaLimitError> {
    check_depth(schema, 0, limits.max_depth)?;
    let compact = serde_json::to_string(schema).map_or(usize::MAX, |s| s.len());
    check_size(compact, limits)?;
    let mut subschemas = 0;
    let mut patterns = 0;
    let mut anchors = HashMap::new();
    walk_subschemas(schema, "", &mut |ptr, node| {
        subschemas += 1;
        if subschemas > limits.max_subschemas {
            return Err(SchemaLimitError::TooManySubschemas {
                limit: limits.max_subschemas,
            });
        }
        patterns += regexes_in(node);
        if patterns > limits.max_patterns {
            return Err(SchemaLimitError::TooManyPatterns {
                limit: limits.max_patterns,
            });
        }
        screen_keywords(node, ptr.is_empty())?;
        if let Some(Value::String(a)) = node.get("$anchor") {
            anchors.insert(a.clone(), ptr.to_string());
        }
        Ok(())
    })?;
    let expanded = Expander {
        root: schema,
        anchors: &anchors,
        limits,
        memo: HashMap::new(),
        stack: Vec::new(),
    }
    .cost(schema)?;
    Ok(SchemaStats {
        subschemas,
        expanded,
        patterns,
    })
}

/// Regular expressions one subschema holds: its `pattern` and the keys of
/// its `patternProperties`.
fn regexes_in(node: &Map<String, Value>) -> usize {
    let pattern = matches!(node.get("pattern"), Some(Value::String(_)));
    let keyed = match node.get("patternProperties") {
        Some(Value::Object(props)) => props.len(),
        _ => 0,
    };
    usize::from(pattern) + keyed
}

fn check_size(size: usize, limits: &SchemaLimits) -> Result<(), SchemaLimitError> {
    if size > limits.max_bytes {
        return Err(SchemaLimitError::TooLarge {
            size,
            limit: limits.max_bytes,
        });
    }
    Ok(())
}

fn check_depth(v: &Value, depth: usize, limit: usize) -> Result<(), SchemaLimitError> {
    if depth > limit {
        return Err(SchemaLimitError::TooDeep { limit });
    }
    match v {
        Value::Object(m) => m
            .values()
            .try_for_each(|c| check_depth(c, depth + 1, limit)),
        Value::Array(a) => a.iter().try_for_each(|c| check_depth(c, depth + 1, limit)),
        _ => Ok(()),
    }
}

/// Keywords whose resolution is dynamic or moves the base URI: refused.
fn screen_keywords(node: &Map<String, Value>, is_root: bool) -> Result<(), SchemaLimitError> {
    for keyword in [
        "$dynamicRef",
        "$recursiveRef",
        "$dynamicAnchor",
        "$recursiveAnchor",
    ] {
        if node.contains_key(keyword) {
            return Err(SchemaLimitError::UnsupportedKeyword { keyword });
        }
    }
    if !is_root && node.contains_key("$id") {
        return Err(SchemaLimitError::UnsupportedKeyword {
            keyword: "$id (below the root)",
        });
    }
    Ok(())
}

/// Keywords whose value is one subschema.
const SINGLE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas, applied to the instance.
const MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
];
/// Containers of subschemas reached only through `$ref`.
const DEFS: &[&str] = &["$defs", "definitions"];

/// The subschemas a schema object applies, with their pointer segments.
fn applied_children(node: &Map<String, Value>) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (k, v) in node {
        let k = k.as_str();
        match v {
            Value::Object(_) | Value::Bool(_) if SINGLE.contains(&k) => out.push((escape(k), v)),
            Value::Array(items) if LISTS.contains(&k) => out.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("{}/{i}", escape(k)), c)),
            ),
            Value::Object(m) if MAPS.contains(&k) => out.extend(
                m.iter()
                    .filter(|(_, c)| c.is_object())
                    .map(|(n, c)| (format!("{}/{}", escape(k), escape(n)), c)),
            ),
            _ => {}
        }
    }
    out
}

fn def_children(node: &Map<String, Value>) -> Vec<(String, &Value)> {
    DEFS.iter()
        .filter_map(|k| node.get(*k).and_then(Value::as_object).map(|m| (k, m)))
        .flat_map(|(k, m)| {
            m.iter()
                .map(move |(n, c)| (format!("{}/{}", escape(k), escape(n)), c))
        })
        .collect()
}

type Visit<'a> = dyn FnMut(&str, &Map<String, Value>) -> Result<(), SchemaLimitError> + 'a;

/// Visit every schema object (applied or under `$defs`) with its pointer.
fn walk_subschemas(v: &Value, ptr: &str, visit: &mut Visit<'_>) -> Result<(), SchemaLimitError> {
    let Value::Object(node) = v else {
        return Ok(());
    };
    visit(ptr, node)?;
    for (seg, child) in applied_children(node).into_iter().chain(def_children(node)) {
        walk_subschemas(child, &format!("{ptr}/{seg}"), visit)?;
    }
    Ok(())
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Computes the expanded size, memoized per `$ref` target.
struct Expander<'a> {
    root: &'a Value,
    anchors: &'a HashMap<String, String>,
    limits: &'a SchemaLimits,
    memo: HashMap<String, u64>,
    /// `$ref` targets being expanded (cycle detection).
    stack: Vec<String>,
}

impl Expander<'_> {
    fn cost(&mut self, v: &Value) -> Result<u64, SchemaLimitError> {
        let Value::Object(node) = v else {
            return Ok(1);
        };
        let mut total: u64 = 1;
        if let Some(r) = node.get("$ref") {
            let reference = r.as_str().unwrap_or_default();
            total = total.saturating_add(self.ref_cost(reference)?);
        }
        for (_, child) in applied_children(node) {
            total = total.saturating_add(self.cost(child)?);
            self.bound(total)?;
        }
        self.bound(total)
    }

    fn bound(&self, total: u64) -> Result<u64, SchemaLimitError> {
        if total > self.limits.max_expanded {
            return Err(SchemaLimitError::ExpansionTooLarge {
                limit: self.limits.max_expanded,
            });
        }
        Ok(total)
    }

    fn ref_cost(&mut self, reference: &str) -> Result<u64, SchemaLimitError> {
        let target = self.resolve(reference)?;
        if let Some(&c) = self.memo.get(&target) {
            return Ok(c);
        }
        if self.stack.contains(&target) {
            return Err(SchemaLimitError::RefCycle { at: target });
        }
        if self.stack.len() >= self.limits.max_ref_depth {
            return Err(SchemaLimitError::RefChainTooLong {
                limit: self.limits.max_ref_depth,
            });
        }
        let node = self
            .root
            .pointer(&target)
            .ok_or_else(|| SchemaLimitError::DanglingRef {
                reference: reference.into(),
            })?;
        self.stack.push(target.clone());
        let cost = self.cost(node);
        self.stack.pop();
        let cost = cost?;
        self.memo.insert(target, cost);
        Ok(cost)
    }

    /// A local reference as a JSON pointer into the root.
    fn resolve(&self, reference: &str) -> Result<String, SchemaLimitError> {
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(SchemaLimitError::RemoteRef {
                reference: reference.into(),
            });
        };
        let fragment = percent_decode(fragment);
        if fragment.is_empty() || fragment.starts_with('/') {
            return Ok(fragment);
        }
        self.anchors
            .get(&fragment)
            .cloned()
            .ok_or_else(|| SchemaLimitError::DanglingRef {
                reference: reference.into(),
            })
    }
}

/// `%XX` escapes of a URI fragment (invalid escapes are kept as written).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
pub(crate) mod tests;
