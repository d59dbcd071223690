//! A compiled JSON Schema that passed the [`SchemaLimits`], and the price
//! of validating a value against it.

use std::ops::Deref;

use serde_json::Value;

use crate::schema::SchemaUse;
use crate::schema_limits::{check_schema, SchemaBudget, SchemaLimitError, SchemaLimits};

/// Why a schema could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    #[error(transparent)]
    Limit(#[from] SchemaLimitError),
    #[error("not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// A validator whose worst-case cost is known: `expanded` subschemas per
/// instance node (see [`crate::schema_limits`]).
pub struct CheckedSchema {
    validator: jsonschema::Validator,
    expanded: u64,
    /// Whether a keyword of the schema may read a whole string value
    /// ([`reads_strings`]); if not, a string value is one node whatever
    /// its length.
    reads_strings: bool,
    /// Subschemas with `uniqueItems: true`, as expanded.
    unique_items: u64,
    /// The expanded size for explaining a failure (name lists count).
    explain_expanded: u64,
}

impl CheckedSchema {
    /// Check the limits, then compile (no remote reference is ever fetched).
    pub fn compile(
        schema: &Value,
        limits: &SchemaLimits,
        schema_use: SchemaUse,
    ) -> Result<Self, SchemaError> {
        let mut unbudgeted = SchemaBudget::UNLIMITED;
        Self::compile_within(schema, limits, schema_use, &mut unbudgeted)
    }

    /// [`CheckedSchema::compile`], its regular expressions charged to
    /// `regexes` (a budget shared by several schemas, e.g. a plugin's); over
    /// it, refused before anything is compiled.
    pub fn compile_within(
        schema: &Value,
        limits: &SchemaLimits,
        schema_use: SchemaUse,
        budget: &mut SchemaBudget,
    ) -> Result<Self, SchemaError> {
        // Weighed within what is left of the budget: an exhausted budget
        // refuses the next regex before any work on it.
        let mut within = limits.clone();
        within.max_pattern_weight = within.max_pattern_weight.min(budget.weight);
        let stats = match check_schema(schema, &within) {
            Ok(stats) => stats,
            Err(e @ SchemaLimitError::Pattern { .. }) => {
                budget.spend_on_refused();
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        budget.charge(&stats)?;
        let validator =
            crate::schema::compile_value(schema, schema_use).map_err(SchemaError::Invalid)?;
        Ok(CheckedSchema {
            validator,
            expanded: stats.expanded,
            reads_strings: reads_strings(schema),
            unique_items: stats.unique_items,
            explain_expanded: stats.explain_expanded,
        })
    }

    /// Subschemas after `$ref` expansion.
    pub fn expanded(&self) -> u64 {
        self.expanded
    }

    /// Upper bound on the work of checking `value` (whether it is valid,
    /// without explaining): every expanded subschema applied to every
    /// instance node. Counting stops at `cap` (the result is then above
    /// `cap`).
    pub fn cost(&self, value: &Value, cap: u64) -> u64 {
        let strings = match self.reads_strings {
            true => Strings::ByLength,
            false => Strings::OneNode,
        };
        self.price_per(self.expanded, value, cap, strings)
    }

    /// Upper bound on the work of explaining a `value` that fails: as
    /// [`CheckedSchema::cost`], but every string priced by its length
    /// whatever the schema, since a failing `anyOf` or `oneOf` copies the
    /// value it failed on (strings and all) once per branch and builds every
    /// error of its branches, and every name of a `required` (or
    /// `dependentRequired`) list counted, since each missing one is an error.
    pub fn cost_of_errors(&self, value: &Value, cap: u64) -> u64 {
        self.price_per(self.explain_expanded, value, cap, Strings::ByLength)
    }

    /// `expanded` subschemas on every node, and every `uniqueItems` on
    /// every array's pairs of items ([`comparisons`]).
    fn price_per(&self, expanded: u64, value: &Value, cap: u64, strings: Strings) -> u64 {
        let per_node = expanded.max(1);
        let nodes = count_nodes_pricing(value, cap / per_node + 1, strings);
        let mut price = nodes.saturating_mul(per_node);
        if self.unique_items > 0 && price <= cap {
            let pairs = comparisons(value) / COMPARED_NODES_PER_UNIT;
            price = price.saturating_add(pairs.saturating_mul(self.unique_items));
        }
        price
    }
}

impl Deref for CheckedSchema {
    type Target = jsonschema::Validator;
    fn deref(&self) -> &jsonschema::Validator {
        &self.validator
    }
}

/// Bytes of a string (a value or a property name) that count as one more
/// node: a keyword applied to a string reads all of it (a `pattern`, a
/// `format`), so a 16 MiB string is no single node. At ~4 ns a byte for
/// the slowest format check (`email`), a unit stays under ~0.3 µs.
pub const STRING_BYTES_PER_NODE: usize = 64;

/// Keywords that read a whole string value: where a schema has none of
/// them, validating a string is a type check, whatever its length (a
/// 1.9 MB `read_file` result against its schema is then ~10 nodes, and is
/// validated inline instead of on the blocking pool). `format` counts
/// unless its value is one of [`NUMBER_FORMATS`]. Found by key anywhere in
/// the schema (a property *named* `pattern` counts too: priced as if it
/// read strings, never the other way).
const STRING_KEYWORDS: &[&str] = &[
    "pattern",
    "patternProperties",
    "propertyNames",
    "format",
    "minLength",
    "maxLength",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "enum",
    "const",
    "uniqueItems",
];

/// Nodes compared, over all pairs of an array's items, that count one
/// unit: the validator hashes items to find duplicates, but its hash is
/// weak (a number by its `f64` bits, so every integer near 2^63 collides;
/// an object by the XOR of its entries), so items can be made to collide
/// and every pair compared: 40,000 colliding pairs of integers, priced
/// 240,000, took 7.7 s (~10 ns a pair; a helper's find).
pub const COMPARED_NODES_PER_UNIT: u64 = 30;

/// What comparing every pair of items, in every array of `v`, could touch:
/// for each array, its items × the nodes under it, halved (each pair once).
pub fn comparisons(v: &Value) -> u64 {
    /// (nodes, work) of `v`; recursion as deep as the value, which the
    /// JSON parser bounds (128 levels).
    fn walk(v: &Value) -> (u64, u64) {
        let sum = |acc: (u64, u64), c: &Value| {
            let (n, w) = walk(c);
            (acc.0.saturating_add(n), acc.1.saturating_add(w))
        };
        match v {
            Value::Array(a) => {
                let (nodes, work) = a.iter().fold((1, 0), sum);
                let pairs = (a.len() as u64).saturating_mul(nodes) / 2;
                (nodes, work.saturating_add(pairs))
            }
            Value::Object(m) => m.values().fold((1, 0), sum),
            _ => (1, 0),
        }
    }
    walk(v).1
}

/// `format` values that name number formats (schemars writes them for
/// Rust's integer and float types): the validator does not know them, so
/// they check nothing (`number_formats_check_nothing` keeps this true).
const NUMBER_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "uint", "int",
    "float", "double",
];

/// Whether a keyword of `schema` may read a whole string value
/// ([`STRING_KEYWORDS`]).
fn reads_strings(schema: &Value) -> bool {
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                let reads = m.iter().any(|(k, v)| match k.as_str() {
                    "format" => !v.as_str().is_some_and(|f| NUMBER_FORMATS.contains(&f)),
                    k => STRING_KEYWORDS.contains(&k),
                });
                if reads {
                    return true;
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    false
}

/// How [`count_nodes_pricing`] counts a string value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strings {
    /// One node more per [`STRING_BYTES_PER_NODE`].
    ByLength,
    /// One node.
    OneNode,
}

/// JSON nodes in `v`: every value counts one, and every string (values and
/// property names) one more per [`STRING_BYTES_PER_NODE`]; counting stops
/// past `cap`.
pub fn count_nodes(v: &Value, cap: u64) -> u64 {
    count_nodes_pricing(v, cap, Strings::ByLength)
}

/// [`count_nodes`], string values counted as `values` says; property
/// names are always priced by their length (every lookup hashes them).
pub fn count_nodes_pricing(v: &Value, cap: u64, values: Strings) -> u64 {
    let text = |s: &str| (s.len() / STRING_BYTES_PER_NODE) as u64;
    let mut stack = vec![v];
    let mut n = 0u64;
    while let Some(v) = stack.pop() {
        n += 1;
        // Children are counted before they are stacked: a 2.6M-item array
        // past the cap is never copied onto the stack.
        match v {
            Value::Array(a) => {
                if n.saturating_add(a.len() as u64) > cap {
                    return n.saturating_add(a.len() as u64);
                }
                stack.extend(a.iter());
            }
            Value::Object(m) => {
                n += m.keys().map(|k| text(k)).sum::<u64>();
                if n.saturating_add(m.len() as u64) > cap {
                    return n.saturating_add(m.len() as u64);
                }
                stack.extend(m.values());
            }
            Value::String(s) if values == Strings::ByLength => n += text(s),
            _ => {}
        }
        if n > cap {
            break;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compile_checks_limits_then_schema() {
        let chain = crate::schema_limits::tests::ref_chain(40);
        assert!(matches!(
            CheckedSchema::compile(&chain, &SchemaLimits::default(), SchemaUse::Results),
            Err(SchemaError::Limit(
                SchemaLimitError::ExpansionTooLarge { .. }
            ))
        ));
        let bad = json!({"type": "object", "properties": {"a": {"type": "nope"}}});
        let err = CheckedSchema::compile(&bad, &SchemaLimits::default(), SchemaUse::Results)
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a valid JSON Schema"), "{err}");
        let ok = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let s = CheckedSchema::compile(&ok, &SchemaLimits::default(), SchemaUse::Results).unwrap();
        assert!(s.is_valid(&json!({"a": 1})));
        assert_eq!(s.expanded(), 2);
        assert_eq!(s.cost(&json!({"a": [1, 2]}), 1000), 2 * 4);
        assert!(s.cost(&json!(vec![0; 10_000]), 100) > 100);
    }

    /// A keyword reads a whole string, so long strings (values and property
    /// names) count as many nodes: 490 `format` checks of one 4 MiB string
    /// took 7 s inline on the executor (a helper's find), priced 984 when a
    /// string was one node.
    #[test]
    fn long_strings_are_priced_by_their_length() {
        let checks: Vec<Value> = (0..490).map(|_| json!({"format": "email"})).collect();
        let schema = json!({"$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object", "properties": {"a": {"allOf": checks}}});
        let s =
            CheckedSchema::compile(&schema, &SchemaLimits::default(), SchemaUse::Results).unwrap();
        let small = json!({"a": "x@y.z"});
        assert_eq!(s.cost(&small, u64::MAX), 2 * s.expanded());
        let long = json!({"a": "a".repeat(4 << 20)});
        let nodes = 2 + (4 << 20) / STRING_BYTES_PER_NODE as u64;
        assert_eq!(s.cost(&long, u64::MAX), nodes * s.expanded());
        #[cfg(feature = "bounded")]
        {
            let budget = crate::bounded::ValidationBudget::default();
            assert!(s.cost(&long, budget.max_cost) > budget.max_cost);
        }
        let key = "k".repeat(6400);
        assert_eq!(count_nodes(&json!({ key: 1 }), u64::MAX), 2 + 100);
    }

    /// Where no keyword reads a string, a long one is a single node: a
    /// 1.9 MB `read_file` result is validated inline (the bench's
    /// `output-check` section measures what the blocking pool cost it).
    /// Any keyword that reads one prices it by its length again, found at
    /// any depth; property names are priced by length either way.
    #[test]
    fn strings_are_priced_by_length_only_where_a_keyword_reads_them() {
        let compile = |s: Value| {
            CheckedSchema::compile(&s, &SchemaLimits::default(), SchemaUse::Results).unwrap()
        };
        let long = json!({"content": "a".repeat(4 << 20), "n": 3});
        let plain = compile(json!({"type": "object", "properties": {
            "content": {"type": "string"},
            "n": {"type": "integer", "format": "uint64", "minimum": 0}}}));
        assert_eq!(plain.cost(&long, u64::MAX), 3 * plain.expanded());
        let key = "k".repeat(6400);
        assert_eq!(
            plain.cost(&json!({ key: 1 }), u64::MAX),
            102 * plain.expanded()
        );
        let by_length = 3 + (4 << 20) / STRING_BYTES_PER_NODE as u64;
        for keyword in [
            json!({"pattern": "^a"}),
            json!({"format": "email"}),
            json!({"format": "regex"}),
            json!({"maxLength": 5}),
            json!({"enum": ["a"]}),
            json!({"const": "a"}),
            json!({"contentMediaType": "application/json"}),
            json!({"items": {"uniqueItems": true}}),
            json!({"anyOf": [{"type": "integer"}, {"propertyNames": {"type": "string"}}]}),
        ] {
            let deep = json!({"type": "object", "properties": {
                "content": {"type": "string"}, "x": {"allOf": [keyword.clone()]}}});
            let s = compile(deep);
            assert_eq!(
                s.cost(&long, u64::MAX),
                by_length * s.expanded(),
                "{keyword}"
            );
        }
    }

    /// The validator knows none of [`NUMBER_FORMATS`]: on a string they
    /// check nothing (were one to become a string check, strings under it
    /// would have to be priced by length again).
    #[test]
    fn number_formats_check_nothing() {
        for format in NUMBER_FORMATS {
            for draft in [
                "http://json-schema.org/draft-07/schema#",
                "https://json-schema.org/draft/2020-12/schema",
            ] {
                let schema = json!({"$schema": draft, "format": format});
                let v = crate::schema::compile_value(&schema, SchemaUse::Arguments).unwrap();
                assert!(
                    v.is_valid(&json!("not a number at all")),
                    "{draft} {format}"
                );
            }
        }
        let email = crate::schema::compile_value(
            &json!({
            "$schema": "http://json-schema.org/draft-07/schema#", "format": "email"}),
            SchemaUse::Arguments,
        )
        .unwrap();
        assert!(
            !email.is_valid(&json!("not an email")),
            "formats are checked here"
        );
    }
}
