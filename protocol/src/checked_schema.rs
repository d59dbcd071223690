//! A compiled JSON Schema that passed the [`SchemaLimits`], and the price
//! of validating a value against it.

use std::ops::Deref;

use serde_json::Value;

use crate::schema_limits::{check_schema, RegexBudget, SchemaLimitError, SchemaLimits};

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
}

impl CheckedSchema {
    /// Check the limits, then compile (no remote reference is ever fetched).
    pub fn compile(schema: &Value, limits: &SchemaLimits) -> Result<Self, SchemaError> {
        let mut unbudgeted = RegexBudget::UNLIMITED;
        Self::compile_within(schema, limits, &mut unbudgeted)
    }

    /// [`CheckedSchema::compile`], its regular expressions charged to
    /// `regexes` (a budget shared by several schemas, e.g. a plugin's); over
    /// it, refused before anything is compiled.
    pub fn compile_within(
        schema: &Value,
        limits: &SchemaLimits,
        regexes: &mut RegexBudget,
    ) -> Result<Self, SchemaError> {
        // Weighed within what is left of the budget: an exhausted budget
        // refuses the next regex before any work on it.
        let mut within = limits.clone();
        within.max_pattern_weight = within.max_pattern_weight.min(regexes.weight);
        let stats = match check_schema(schema, &within) {
            Ok(stats) => stats,
            Err(e @ SchemaLimitError::Pattern { .. }) => {
                regexes.spend_on_refused();
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        regexes.charge(&stats)?;
        let validator = crate::schema::compile_value(schema).map_err(SchemaError::Invalid)?;
        Ok(CheckedSchema {
            validator,
            expanded: stats.expanded,
        })
    }

    /// Subschemas after `$ref` expansion.
    pub fn expanded(&self) -> u64 {
        self.expanded
    }

    /// Upper bound on the work of validating `value`: every expanded
    /// subschema applied to every instance node. Counting stops at `cap`
    /// (the result is then above `cap`).
    pub fn cost(&self, value: &Value, cap: u64) -> u64 {
        let node_cap = cap / self.expanded.max(1) + 1;
        count_nodes(value, node_cap).saturating_mul(self.expanded.max(1))
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

/// JSON nodes in `v`: every value counts one, and every string (values and
/// property names) one more per [`STRING_BYTES_PER_NODE`]; counting stops
/// past `cap`.
pub fn count_nodes(v: &Value, cap: u64) -> u64 {
    let text = |s: &str| (s.len() / STRING_BYTES_PER_NODE) as u64;
    let mut stack = vec![v];
    let mut n = 0u64;
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => {
                n += m.keys().map(|k| text(k)).sum::<u64>();
                stack.extend(m.values());
            }
            Value::String(s) => n += text(s),
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
            CheckedSchema::compile(&chain, &SchemaLimits::default()),
            Err(SchemaError::Limit(
                SchemaLimitError::ExpansionTooLarge { .. }
            ))
        ));
        let bad = json!({"type": "object", "properties": {"a": {"type": "nope"}}});
        let err = CheckedSchema::compile(&bad, &SchemaLimits::default())
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a valid JSON Schema"), "{err}");
        let ok = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let s = CheckedSchema::compile(&ok, &SchemaLimits::default()).unwrap();
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
        let s = CheckedSchema::compile(&schema, &SchemaLimits::default()).unwrap();
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
}
