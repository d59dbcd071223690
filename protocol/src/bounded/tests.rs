use super::*;
use crate::schema_limits::SchemaLimits;
use serde_json::{json, Map};
use std::time::Instant;

/// Within the static limits but slow: `items` applies an 11-link `anyOf`
/// chain (~8k expanded subschemas) to every element, and every branch fails.
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

fn budget(ms: u64) -> Validation {
    Validation::new(ValidationBudget {
        time: Duration::from_millis(ms),
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
    assert_eq!(
        result.unwrap_err(),
        ValidationFailure::BudgetExceeded(Duration::from_millis(300))
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
