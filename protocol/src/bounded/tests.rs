use super::*;
use crate::schema_limits::SchemaLimits;
use serde_json::{json, Map};
use std::time::Instant;

/// Within the static limits but slow to explain: `items` applies an
/// 11-link `anyOf` chain (~8k expanded subschemas) to every element, and
/// every branch fails (checking is quick, listing the errors is not).
fn slow_schema() -> Arc<CheckedSchema> {
    let mut defs = Map::new();
    for i in 0..11 {
        let next = format!("#/$defs/a{}", i + 1);
        defs.insert(
            format!("a{i}"),
            json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert("a11".into(), json!({"type": "string"}));
    let s = json!({"type": "object",
        "properties": {"xs": {"type": "array", "items": {"$ref": "#/$defs/a0"}}},
        "$defs": defs});
    Arc::new(CheckedSchema::compile(&s, &SchemaLimits::default()).unwrap())
}

/// A budget of `ms` for each step, explaining at any price.
fn budget(ms: u64) -> Validation {
    Validation::new(ValidationBudget {
        time: Duration::from_millis(ms),
        max_explain_cost: u64::MAX / 2,
        ..ValidationBudget::default()
    })
}

#[tokio::test(flavor = "current_thread")]
async fn slow_validation_ends_at_its_budget_and_the_executor_keeps_running() {
    let schema = slow_schema();
    let value = json!({"xs": vec![1; 80]});
    let v = budget(300);
    assert!(v.cost(&schema, &value) <= v.budget().max_cost);
    let started = Instant::now();
    let ticker = async {
        let mut ticks = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ticks += 1;
            if ticks == 5 {
                return started.elapsed();
            }
        }
    };
    let (result, ticked_at) = tokio::join!(v.validate(&schema, value), ticker);
    let ValidationFailure::Invalid(why) = result.unwrap_err() else {
        panic!("a failing value is invalid, explained or not")
    };
    assert_eq!(
        why,
        "the value does not match; its errors were not listed: validation did not finish within its budget of 300ms"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        ticked_at < Duration::from_millis(290),
        "executor was blocked: {ticked_at:?}"
    );
}

#[tokio::test]
async fn too_costly_is_refused_without_running() {
    let schema = slow_schema();
    let v = budget(60_000);
    let started = Instant::now();
    let err = v
        .validate(&schema, json!({"xs": vec![1; 1000]}))
        .await
        .unwrap_err();
    assert!(matches!(err, ValidationFailure::TooCostly { .. }), "{err}");
    assert!(err.to_string().contains("validation budget"));
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn cheap_and_off_thread_validations_give_the_same_answers() {
    let s = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let schema = Arc::new(CheckedSchema::compile(&s, &SchemaLimits::default()).unwrap());
    for inline_cost in [u64::MAX / 2, 0] {
        let v = Validation::new(ValidationBudget {
            inline_cost,
            max_cost: u64::MAX,
            ..ValidationBudget::default()
        });
        assert_eq!(
            v.validate(&schema, json!({"n": 1})).await.unwrap(),
            json!({"n": 1})
        );
        let err = v.validate(&schema, json!({"n": "x"})).await.unwrap_err();
        assert!(
            matches!(&err, ValidationFailure::Invalid(m) if m.contains("/n")),
            "{err}"
        );
        assert_eq!(
            v.check_result(r#"{"n":2}"#, Some(&schema)).await.unwrap(),
            json!({"n": 2})
        );
        let e = v
            .check_result(r#"{"m":2}"#, Some(&schema))
            .await
            .unwrap_err();
        assert!(e.contains("outputSchema"), "{e}");
        assert!(v
            .check_result("[1]", None)
            .await
            .unwrap_err()
            .contains("not a JSON object"));
    }
}

#[tokio::test]
async fn overrun_result_check_is_a_clear_contract_message() {
    let schema = slow_schema();
    let text = json!({"xs": vec![1; 80]}).to_string();
    let e = budget(200)
        .check_result(&text, Some(&schema))
        .await
        .unwrap_err();
    assert!(e.contains("budget"), "{e}");
}

/// A failing `anyOf` copies the value it failed on once per branch: 490
/// branches failing on one 4 MiB string took ~1 s and ~2.4 GB to explain,
/// priced 984 (a string with no keyword that reads it is one node to
/// check). Checking is quick and copies nothing; explaining is priced with
/// every string by its length, and over its cap the failure is reported
/// without its errors. A small failing value is still explained.
#[tokio::test(flavor = "current_thread")]
async fn a_failure_is_explained_only_within_its_own_price() {
    let branches: Vec<Value> = (0..490).map(|_| json!({"type": "integer"})).collect();
    let s = json!({"type": "object", "properties": {"a": {"anyOf": branches}}});
    let schema = Arc::new(CheckedSchema::compile(&s, &SchemaLimits::default()).unwrap());
    let v = Validation::shared();
    let long = json!({"a": "a".repeat(4 << 20)});
    assert!(v.cost(&schema, &long) <= v.budget().inline_cost);
    let started = Instant::now();
    let ValidationFailure::Invalid(why) = v.validate(&schema, long).await.unwrap_err() else {
        panic!("invalid")
    };
    assert!(
        why.starts_with(
            "the value does not match; its errors were not listed (listing them would cost"
        ),
        "{why}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let ValidationFailure::Invalid(why) = v.validate(&schema, json!({"a": "x"})).await.unwrap_err()
    else {
        panic!("invalid")
    };
    assert!(why.starts_with("/a: "), "explained: {why}");
}

/// A `multipleOf` of a fraction weighs [`FRACTIONAL_MULTIPLE_OF_WEIGHT`]:
/// the validator divides big fractions for it (~9 µs for a float near
/// 1e308, against ~0.3 µs a unit).
#[test]
fn fractional_multiple_of_is_priced_by_its_weight() {
    use crate::schema_limits::FRACTIONAL_MULTIPLE_OF_WEIGHT;
    let compile = |s: Value| CheckedSchema::compile(&s, &SchemaLimits::default()).unwrap();
    let whole = compile(json!({"type": "array", "items": {"multipleOf": 3}}));
    let fraction = compile(json!({"type": "array", "items": {"multipleOf": 0.1}}));
    assert_eq!(whole.expanded(), 2);
    assert_eq!(fraction.expanded(), 1 + FRACTIONAL_MULTIPLE_OF_WEIGHT);
    let floats = json!(vec![1.7976931348623157e308; 13]);
    assert_eq!(
        fraction.cost(&floats, u64::MAX),
        14 * (1 + FRACTIONAL_MULTIPLE_OF_WEIGHT)
    );
}
