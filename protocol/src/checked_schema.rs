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
        let stats = check_schema(schema, limits)?;
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

/// JSON nodes in `v` (every value counts one), counting stops past `cap`.
pub fn count_nodes(v: &Value, cap: u64) -> u64 {
    let mut stack = vec![v];
    let mut n = 0u64;
    while let Some(v) = stack.pop() {
        n += 1;
        if n > cap {
            break;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
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
}
