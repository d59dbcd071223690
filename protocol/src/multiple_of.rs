//! `multipleOf` in a result, judged as MCP clients judge it.
//!
//! The official SDKs validate `structuredContent` against the tool's output
//! schema again: the TypeScript SDK with AJV, the Python SDK with
//! python-jsonschema. Both divide in floating point and call the value a
//! multiple when the quotient is an integer, so `19.99` is not a multiple of
//! `0.01` for them (`1998.9999999999998`), where jsonschema's exact decimal
//! arithmetic says it is. A result the server passed then failed in the
//! client, which threw it away as an error (a helper's find with both SDKs).
//! Results are therefore checked by the clients' rule; arguments keep the
//! exact one, which accepts every value a client could mean.

use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Number, Value};

/// A `multipleOf` checked by floating-point division, as AJV and
/// python-jsonschema do.
struct ClientsMultipleOf {
    divisor: f64,
    /// The divisor as written, for the message.
    shown: Number,
}

/// The keyword factory for [`jsonschema::ValidationOptions::with_keyword`].
pub fn clients_multiple_of<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    path: jsonschema::paths::Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|d| d > 0.0 && d.is_finite()) => {
            Ok(Box::new(ClientsMultipleOf {
                divisor: n.as_f64().unwrap_or(1.0),
                shown: n.clone(),
            }))
        }
        _ => Err(ValidationError::custom(format!(
            "multipleOf at {path} must be a number greater than 0"
        ))),
    }
}

impl<'i> Keyword<'i> for ClientsMultipleOf {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(ValidationError::custom(format!(
            "{instance} is not a multiple of {} (as MCP clients divide: in floating point)",
            self.shown
        )))
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        let Value::Number(n) = instance else {
            return true;
        };
        is_multiple(n, self.divisor)
    }
}

/// AJV: `data / divisor` is an integer. python-jsonschema: the same for a
/// fractional divisor, `value % divisor == 0` for an integer one, which
/// agrees with the quotient test wherever both are exact; integers are
/// taken exactly so that values past 2^53 are not rounded first.
fn is_multiple(n: &Number, divisor: f64) -> bool {
    if divisor.fract() == 0.0 && divisor <= u64::MAX as f64 {
        let d = divisor as u64;
        if let Some(v) = n.as_u64() {
            return v % d == 0;
        }
        if let Some(v) = n.as_i64() {
            return v.unsigned_abs() % d == 0;
        }
    }
    let Some(v) = n.as_f64() else {
        return false;
    };
    let quotient = v / divisor;
    quotient.is_finite() && quotient.trunc() == quotient
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn results(schema: Value) -> jsonschema::Validator {
        crate::schema::compile_value(&schema, crate::SchemaUse::Results).unwrap()
    }

    fn arguments(schema: Value) -> jsonschema::Validator {
        crate::schema::compile_value(&schema, crate::SchemaUse::Arguments).unwrap()
    }

    /// The values the SDKs' validators refuse (checked with AJV 8 and
    /// python-jsonschema 4 by a helper), refused in results; arguments
    /// keep the exact rule.
    #[test]
    fn results_are_judged_as_clients_judge_them() {
        for (divisor, value, clients_accept) in [
            (json!(0.01), json!(19.99), false),
            (json!(0.1), json!(0.3), false),
            (json!(0.1), json!(1.7e308), false),
            (json!(0.5), json!(2.5), true),
            (json!(0.25), json!(-1.75), true),
            (json!(0.01), json!(0.5), true),
            (json!(2), json!(7.5), false),
            (json!(2), json!(8), true),
            (json!(3), json!(-9), true),
            (json!(3), json!(u64::MAX), true),
            (json!(2), json!("8"), true),
        ] {
            let schema = json!({"multipleOf": divisor});
            assert_eq!(
                results(schema.clone()).is_valid(&value),
                clients_accept,
                "{value} multipleOf {divisor}"
            );
            let nested = json!({"type": "object", "properties": {"n": {"multipleOf": divisor}}});
            assert_eq!(
                results(nested).is_valid(&json!({"n": value})),
                clients_accept,
                "nested {value} multipleOf {divisor}"
            );
        }
        assert!(arguments(json!({"multipleOf": 0.01})).is_valid(&json!(19.99)));
        let e = results(json!({"multipleOf": 0.01}))
            .validate(&json!(19.99))
            .unwrap_err()
            .to_string();
        assert!(e.contains("19.99 is not a multiple of 0.01"), "{e}");
    }

    #[test]
    fn a_divisor_that_is_not_a_positive_number_is_refused() {
        for bad in [json!(0), json!(-1), json!("2"), json!(null)] {
            let schema = json!({"multipleOf": bad});
            assert!(
                crate::schema::compile_value(&schema, crate::SchemaUse::Results).is_err(),
                "{schema}"
            );
        }
    }
}
