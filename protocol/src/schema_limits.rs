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

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::schema_regex::{self, PatternError, MAX_PATTERN_WEIGHT};
use crate::text::display_clipped;

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
    /// Distinct regular expressions (`pattern` values, `patternProperties`
    /// keys) in every subschema the compiler reaches, `$ref` targets
    /// included: each is compiled when the schema is (distinct ones are not
    /// cached).
    pub max_patterns: usize,
    /// Their [weight](crate::schema_regex) in all: what compiling them may
    /// cost, whatever route the compiler takes (each one is also at most
    /// [`MAX_PATTERN_WEIGHT`]).
    pub max_pattern_weight: u64,
}

/// Compiled size at most one schema regex may take (the regex engine's
/// `size_limit`; its own default is 10 MiB): `[\s\S]{10000}` took ~60 ms
/// to compile under the default and is refused in ~2 ms under this (its
/// weight refuses it first now, see `schema_regex`).
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
            max_pattern_weight: 1_000_000,
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
    #[error("regex at {at} {error}")]
    Pattern { at: String, error: PatternError },
    #[error("schema's regular expressions weigh more than {limit} in all (regex weight limit: 1,000,000 a schema, and what is left of 2,000,000 for a plugin or server)")]
    PatternsTooHeavy { limit: u64 },
    #[error("schema has {count} regular expressions of weight {weight}, over the {left} left of its plugin's or server's regex budget")]
    PatternBudget {
        count: usize,
        weight: u64,
        left: SchemaBudget,
    },
    #[error("schema has {count} subschemas, over the {left} left of its plugin's or server's schema budget")]
    SubschemaBudget { count: usize, left: usize },
}

/// What several schemas may cost in all (one plugin's on the server, one
/// server's in the harness): their subschemas (each is compiled, ~2 KB of
/// validator: 256 tools with two schemas of 1,600 properties each, inside
/// every per-schema limit, held 1.5 GB) and their regular expressions. The
/// schemas that do not fit are refused before they are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaBudget {
    pub subschemas: usize,
    pub patterns: usize,
    pub weight: u64,
}

impl std::fmt::Display for SchemaBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} regexes of weight {}", self.patterns, self.weight)
    }
}

impl SchemaBudget {
    /// One plugin's or one server's: 10,000 subschemas (five schemas at
    /// the per-schema limit; ~20 MB compiled), and at most ~0.5 s of regex
    /// compiling in all on a 2-core machine (see `schema_regex`).
    pub const PER_SOURCE: SchemaBudget = SchemaBudget {
        subschemas: 10_000,
        patterns: 256,
        weight: 2_000_000,
    };
    pub const UNLIMITED: SchemaBudget = SchemaBudget {
        subschemas: usize::MAX,
        patterns: usize::MAX,
        weight: u64::MAX,
    };

    /// What a refused regex costs: it was weighed (its DFA built up to the
    /// limit) all the same, so refusals cannot add up without bound.
    pub fn spend_on_refused(&mut self) {
        self.patterns = self.patterns.saturating_sub(1);
        self.weight = self.weight.saturating_sub(MAX_PATTERN_WEIGHT);
    }

    /// Take what `stats` needs, or refuse and take nothing.
    pub fn charge(&mut self, stats: &SchemaStats) -> Result<(), SchemaLimitError> {
        if stats.subschemas > self.subschemas {
            return Err(SchemaLimitError::SubschemaBudget {
                count: stats.subschemas,
                left: self.subschemas,
            });
        }
        if stats.patterns > self.patterns || stats.pattern_weight > self.weight {
            return Err(SchemaLimitError::PatternBudget {
                count: stats.patterns,
                weight: stats.pattern_weight,
                left: *self,
            });
        }
        self.subschemas -= stats.subschemas;
        self.patterns -= stats.patterns;
        self.weight -= stats.pattern_weight;
        Ok(())
    }
}

/// What the check measured (the expanded size prices validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaStats {
    pub subschemas: usize,
    pub expanded: u64,
    /// Distinct regular expressions the compile will build.
    pub patterns: usize,
    /// Their weight in all.
    pub pattern_weight: u64,
    /// Subschemas with `uniqueItems: true`, after `$ref` expansion: each
    /// compares the items of an array it applies to (see
    /// `CheckedSchema::cost`).
    pub unique_items: u64,
    /// The expanded size for explaining a failure: as `expanded`, each
    /// subschema counting one more per name its `required`,
    /// `dependentRequired` or `dependencies` lists (see
    /// `CheckedSchema::cost_of_errors`). Not bounded by `max_expanded`.
    pub explain_expanded: u64,
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
    let mut census = Census::new(limits);
    walk_subschemas(schema, "", &mut census)?;
    census.walk_ref_targets(schema)?;
    let pattern_weight = census.weigh_regexes()?;
    let unbounded = SchemaLimits {
        max_expanded: u64::MAX,
        ..limits.clone()
    };
    let expand = |weigh, limits| {
        Expander {
            root: schema,
            anchors: &census.anchors,
            limits,
            weigh,
            memo: HashMap::new(),
            stack: Vec::new(),
        }
        .cost(schema)
    };
    Ok(SchemaStats {
        subschemas: census.subschemas,
        expanded: expand(subschema_weight, limits)?,
        patterns: census.regexes.len(),
        pattern_weight,
        unique_items: expand(unique_items_weight, limits)?,
        explain_expanded: expand(explain_weight, &unbounded)?,
    })
}

/// What a walk over a schema's subschemas found: their number, anchors,
/// `$ref`s and distinct regular expressions (each with where it was first
/// seen). A subschema reached twice is counted once.
struct Census<'a> {
    limits: &'a SchemaLimits,
    seen: HashSet<*const Map<String, Value>>,
    subschemas: usize,
    anchors: HashMap<String, String>,
    refs: Vec<&'a str>,
    /// Each distinct regex and the pointer where it was first seen.
    regexes: Vec<(&'a str, String)>,
    distinct: HashSet<&'a str>,
}

impl<'a> Census<'a> {
    fn new(limits: &'a SchemaLimits) -> Self {
        Census {
            limits,
            seen: HashSet::new(),
            subschemas: 0,
            anchors: HashMap::new(),
            refs: Vec::new(),
            regexes: Vec::new(),
            distinct: HashSet::new(),
        }
    }

    /// Takes one subschema; `false` when it was already taken.
    fn visit(&mut self, ptr: &str, node: &'a Map<String, Value>) -> Result<bool, SchemaLimitError> {
        if !self.seen.insert(node as *const _) {
            return Ok(false);
        }
        self.subschemas += 1;
        if self.subschemas > self.limits.max_subschemas {
            return Err(SchemaLimitError::TooManySubschemas {
                limit: self.limits.max_subschemas,
            });
        }
        for (segment, regex) in regexes_in(node) {
            if self.distinct.insert(regex) {
                self.regexes.push((regex, format!("{ptr}/{segment}")));
            }
        }
        if self.regexes.len() > self.limits.max_patterns {
            return Err(SchemaLimitError::TooManyPatterns {
                limit: self.limits.max_patterns,
            });
        }
        screen_keywords(node, ptr.is_empty())?;
        if let Some(Value::String(a)) = node.get("$anchor") {
            self.anchors.insert(a.clone(), ptr.to_string());
        }
        if let Some(Value::String(r)) = node.get("$ref") {
            self.refs.push(r);
        }
        Ok(true)
    }

    /// Walks what `$ref`s point to that the walk from the root did not
    /// reach (a subschema kept under a keyword no validator applies is
    /// still compiled when a `$ref` names it). A reference that does not
    /// resolve is left to the [`Expander`], which refuses it.
    fn walk_ref_targets(&mut self, root: &'a Value) -> Result<(), SchemaLimitError> {
        while let Some(reference) = self.refs.pop() {
            let Ok(target) = resolve_local(reference, &self.anchors) else {
                continue;
            };
            if let Some(node) = root.pointer(&target) {
                walk_subschemas(node, &target, self)?;
            }
        }
        Ok(())
    }

    /// The regexes' weight in all; the first one over a limit is refused
    /// with where it is.
    /// Each regex is weighed within what is left of the schema's limit, so
    /// the work stops where the limit is passed.
    fn weigh_regexes(&self) -> Result<u64, SchemaLimitError> {
        let limit = self.limits.max_pattern_weight;
        let mut total = 0u64;
        for (regex, at) in &self.regexes {
            let left = limit - total;
            let weight =
                schema_regex::weigh(regex, MAX_PATTERN_WEIGHT.min(left)).map_err(|error| {
                    match error {
                        PatternError::TooHeavy { .. } if left < MAX_PATTERN_WEIGHT => {
                            SchemaLimitError::PatternsTooHeavy { limit }
                        }
                        error => SchemaLimitError::Pattern {
                            at: display_clipped(at, 256),
                            error,
                        },
                    }
                })?;
            total += weight;
        }
        Ok(total)
    }
}

/// Regular expressions one subschema holds, with their pointer segments:
/// its `pattern` and the keys of its `patternProperties`.
fn regexes_in(node: &Map<String, Value>) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    if let Some(Value::String(p)) = node.get("pattern") {
        out.push(("pattern".to_string(), p.as_str()));
    }
    if let Some(Value::Object(props)) = node.get("patternProperties") {
        out.extend(
            props
                .keys()
                .map(|k| (format!("patternProperties/{}", escape(k)), k.as_str())),
        );
    }
    out
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

/// Visit every schema object (applied or under `$defs`) with its pointer,
/// each once.
fn walk_subschemas<'a>(
    v: &'a Value,
    ptr: &str,
    census: &mut Census<'a>,
) -> Result<(), SchemaLimitError> {
    let Value::Object(node) = v else {
        return Ok(());
    };
    if !census.visit(ptr, node)? {
        return Ok(());
    }
    for (seg, child) in applied_children(node).into_iter().chain(def_children(node)) {
        walk_subschemas(child, &format!("{ptr}/{seg}"), census)?;
    }
    Ok(())
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// What a subschema with a `multipleOf` of a fraction counts as: the
/// validator divides a float by it as big fractions (~1,100-bit numbers
/// for a value near 1e308), ~9 µs where a unit is ~0.3 µs (60 such checks
/// of 13 large floats took 8.8 ms inline, priced 945; a helper's find).
pub const FRACTIONAL_MULTIPLE_OF_WEIGHT: u64 = 32;

/// JSON nodes of an `enum` or `const` that count as one subschema more:
/// the validator compares a value with each option in turn (a mixed-type
/// `enum` of 32,000 numbers took ~110 µs a value, ~0.3 µs being a unit;
/// a helper's find).
pub const LITERAL_NODES_PER_WEIGHT: u64 = 32;

/// What one subschema counts in the expanded size: one, more for a
/// `multipleOf` of a fraction and for a long `enum` or `const`.
fn subschema_weight(node: &Map<String, Value>) -> u64 {
    let fractional = node
        .get("multipleOf")
        .is_some_and(|d| !(d.is_u64() || d.is_i64()));
    let literals: u64 = ["enum", "const"]
        .iter()
        .filter_map(|k| node.get(*k))
        .map(|v| json_nodes(v) / LITERAL_NODES_PER_WEIGHT)
        .sum();
    let base = if fractional {
        FRACTIONAL_MULTIPLE_OF_WEIGHT
    } else {
        1
    };
    base + literals
}

/// What one subschema counts when a failure is explained: its weight, and
/// one more per name its `required`, `dependentRequired` or `dependencies`
/// lists. A failing `anyOf`/`oneOf` builds every error of its branches, and
/// such a list makes one error per missing name: `required` with 9,000
/// names under a one-branch `anyOf`, against 247 empty objects (priced
/// 996), built 2.2M errors, 0.8 s and 736 MB (a helper's find).
fn explain_weight(node: &Map<String, Value>) -> u64 {
    let names = |v: &Value| v.as_array().map_or(0, |a| a.len() as u64);
    let required = node.get("required").map_or(0, names);
    let dependent: u64 = ["dependentRequired", "dependencies"]
        .iter()
        .filter_map(|k| node.get(*k).and_then(Value::as_object))
        .flat_map(|m| m.values())
        .map(names)
        .sum();
    subschema_weight(node) + required + dependent
}

/// One for a subschema with `uniqueItems: true`, else none.
fn unique_items_weight(node: &Map<String, Value>) -> u64 {
    u64::from(node.get("uniqueItems") == Some(&Value::Bool(true)))
}

/// The JSON nodes of `v` (every value counts one).
fn json_nodes(v: &Value) -> u64 {
    let mut stack = vec![v];
    let mut n = 0u64;
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    n
}

/// Computes the expanded size, memoized per `$ref` target.
struct Expander<'a> {
    root: &'a Value,
    anchors: &'a HashMap<String, String>,
    limits: &'a SchemaLimits,
    /// What one subschema counts (its `$ref` and applied children are added).
    weigh: fn(&Map<String, Value>) -> u64,
    memo: HashMap<String, u64>,
    /// `$ref` targets being expanded (cycle detection).
    stack: Vec<String>,
}

impl Expander<'_> {
    fn cost(&mut self, v: &Value) -> Result<u64, SchemaLimitError> {
        let Value::Object(node) = v else {
            // A boolean schema weighs what an empty one does.
            return Ok((self.weigh)(&Map::new()));
        };
        let mut total: u64 = (self.weigh)(node);
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

    fn resolve(&self, reference: &str) -> Result<String, SchemaLimitError> {
        resolve_local(reference, self.anchors)
    }
}

/// A local reference as a JSON pointer into the root.
fn resolve_local(
    reference: &str,
    anchors: &HashMap<String, String>,
) -> Result<String, SchemaLimitError> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(SchemaLimitError::RemoteRef {
            reference: reference.into(),
        });
    };
    let fragment = percent_decode(fragment);
    if fragment.is_empty() || fragment.starts_with('/') {
        return Ok(fragment);
    }
    anchors
        .get(&fragment)
        .cloned()
        .ok_or_else(|| SchemaLimitError::DanglingRef {
            reference: reference.into(),
        })
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
