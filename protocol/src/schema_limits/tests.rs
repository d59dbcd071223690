use super::*;
use crate::schema_regex::{PatternError, MAX_PATTERN_WEIGHT};
use serde_json::json;
use std::time::{Duration, Instant};

/// `$defs` a0..a{n}: each `anyOf` of two `$ref`s to the next; the last one
/// only accepts strings, so a number makes every branch fail: 2^n paths.
pub(crate) fn ref_chain(n: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..n {
        let next = format!("#/$defs/a{}", i + 1);
        defs.insert(
            format!("a{i}"),
            json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(format!("a{n}"), json!({"type": "string"}));
    json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs})
}

fn limits() -> SchemaLimits {
    SchemaLimits::default()
}

/// The hostile schema, unchecked, freezes a validating thread: it has not
/// finished after 2 s (2^40 subschema visits). This is what the limits
/// below prevent; the thread is left to die with the test process.
#[test]
fn ref_chain_freezes_unchecked_validation() {
    let schema = ref_chain(40);
    let validator = jsonschema::validator_for(&schema).expect("compiles");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = crate::validate(&validator, &json!({"x": 1}));
        let _ = tx.send(r.is_ok());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(2)).is_err(),
        "validation finished: the hostile schema is not hostile"
    );
}

#[test]
fn ref_chain_is_refused_statically_and_promptly() {
    let started = Instant::now();
    let err = check_schema(&ref_chain(40), &limits()).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(err, SchemaLimitError::ExpansionTooLarge { limit: 10_000 });
    assert!(err.to_string().contains("$ref expansion limit"), "{err}");
    // A short chain is fine, and its expanded size is counted exactly:
    // a3 = 1, a(i) = 1 + 2 × (1 + a(i+1)) (the node, two `$ref` nodes and
    // their targets); root + x + a0.
    let stats = check_schema(&ref_chain(3), &limits()).unwrap();
    let a2 = 1 + 2 * (1 + 1);
    let a1 = 1 + 2 * (1 + a2);
    let a0 = 1 + 2 * (1 + a1);
    assert_eq!(stats.expanded, 1 + 1 + a0);
}

#[test]
fn ref_cycles_are_refused() {
    let direct = json!({"type": "object", "properties": {"x": {"$ref": "#"}}});
    let via_defs = json!({"type": "object", "$ref": "#/$defs/a",
        "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}});
    let self_ref = json!({"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}});
    for s in [direct, via_defs, self_ref] {
        let err = check_schema(&s, &limits()).unwrap_err();
        assert!(
            matches!(err, SchemaLimitError::RefCycle { .. }),
            "{s}: {err}"
        );
        assert!(err.to_string().contains("recursive"));
    }
}

#[test]
fn only_local_refs() {
    for r in [
        "https://example.com/s.json",
        "s.json#/a",
        "file:///etc/passwd",
    ] {
        let s = json!({"type": "object", "properties": {"x": {"$ref": r}}});
        let err = check_schema(&s, &limits()).unwrap_err();
        assert_eq!(
            err,
            SchemaLimitError::RemoteRef {
                reference: r.into()
            }
        );
    }
    let dangling = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/nope"}}});
    assert!(matches!(
        check_schema(&dangling, &limits()),
        Err(SchemaLimitError::DanglingRef { .. })
    ));
    let dynamic = json!({"type": "object", "properties": {"x": {"$dynamicRef": "#a"}}});
    assert!(matches!(
        check_schema(&dynamic, &limits()),
        Err(SchemaLimitError::UnsupportedKeyword { .. })
    ));
}

#[test]
fn anchors_and_escaped_pointers_resolve() {
    let s = json!({"type": "object",
        "properties": {"a": {"$ref": "#item"}, "b": {"$ref": "#/$defs/a~1b%25"}},
        "$defs": {"x": {"$anchor": "item", "type": "string"}, "a/b%": {"type": "integer"}}});
    let stats = check_schema(&s, &limits()).unwrap();
    assert_eq!(stats.expanded, 1 + 2 + 2);
    assert_eq!(stats.subschemas, 5);
}

#[test]
fn size_depth_and_count_limits_name_themselves() {
    let mut deep = json!({"type": "string"});
    for _ in 0..40 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    let err = check_schema(&deep, &limits()).unwrap_err();
    assert_eq!(err, SchemaLimitError::TooDeep { limit: 32 });
    assert!(err.to_string().contains("depth limit"));

    let props: Map<String, Value> = (0..3000).map(|i| (format!("p{i}"), json!({}))).collect();
    let wide = json!({"type": "object", "properties": props});
    let err = check_schema(&wide, &limits()).unwrap_err();
    assert_eq!(err, SchemaLimitError::TooManySubschemas { limit: 2000 });

    let text = format!(
        r#"{{"type":"object","description":"{}"}}"#,
        "x".repeat(70_000)
    );
    let err = check_schema_text(&text, &limits()).unwrap_err();
    assert!(err.to_string().contains("schema size limit"), "{err}");
}

/// Numbers written short re-serialize longer (`1e9` → `1000000000.0`): the
/// size limit applies to the re-serialized form too.
#[test]
fn size_is_measured_after_reserialization() {
    let nums = vec!["1e9"; 6000].join(",");
    let text = format!(r#"{{"type":"object","enum":[{nums}]}}"#);
    assert!(text.len() < DEFAULT_MAX_SCHEMA_BYTES);
    check_schema_text(&text, &limits()).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(matches!(
        check_schema(&v, &limits()),
        Err(SchemaLimitError::TooLarge { .. })
    ));
}

/// Each regex is compiled under `PATTERN_SIZE_LIMIT`: one whose program is
/// huge (`[\s\S]{10000}`: ~60 ms to compile under the engine's default,
/// and distinct ones are not cached) is refused; a plausible Unicode one is
/// not. Only `pattern` values and `patternProperties` keys count, not a
/// property that happens to be named `pattern`.
#[test]
fn regexes_are_counted_and_bounded() {
    let huge = json!({"type": "object", "properties": {"a": {"pattern": "[\\s\\S]{10000}"}}});
    let e = crate::schema::compile_value(&huge, crate::SchemaUse::Arguments).unwrap_err();
    assert!(e.contains("is not a \"regex\""), "{e}");
    let unicode =
        json!({"type": "object", "properties": {"a": {"pattern": "^[\\p{L}\\p{N}_-]{1,64}$"}}});
    assert!(crate::schema::compile_value(&unicode, crate::SchemaUse::Arguments).is_ok());
    // The engine is the regex crate alone: no backtracking construct
    // compiles, checked or not.
    for p in [r"(?=(a+))\1b", r"(?<=a.*)x", r"^(?=.*\d)\w+$"] {
        let s = json!({"type": "object", "properties": {"a": {"pattern": p}}});
        assert!(
            crate::schema::compile_value(&s, crate::SchemaUse::Arguments).is_err(),
            "{p}"
        );
    }
    let named = json!({
        "type": "object",
        "properties": {"pattern": {"type": "string", "pattern": "^x"}},
        "patternProperties": {"^a": {}, "^b": {"pattern": "c"}}
    });
    assert_eq!(check_schema(&named, &limits()).unwrap().patterns, 4);
}

fn string_property(pattern: &str) -> Value {
    json!({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}})
}

/// A regex kept under a keyword no validator applies is still compiled
/// when a `$ref` names it: it is found, weighed and named by where it is.
#[test]
fn regexes_reached_only_through_ref_are_weighed() {
    let heavy = "[\\s\\S]{10000}";
    let hidden = json!({"type": "object",
        "properties": {"a": {"$ref": "#/x-hidden/p"}},
        "x-hidden": {"p": {"type": "string", "pattern": heavy, "patternProperties": {"^k": {}}}}});
    let err = check_schema(&hidden, &limits()).unwrap_err();
    assert_eq!(
        err,
        SchemaLimitError::Pattern {
            at: "/x-hidden/p/pattern".into(),
            error: PatternError::TooHeavy {
                limit: MAX_PATTERN_WEIGHT
            }
        }
    );
    assert!(err.to_string().contains("regex weight limit"), "{err}");
    let light = json!({"type": "object",
        "properties": {"a": {"$ref": "#/x-hidden/p"}, "b": {"$ref": "#/x-hidden/p"}},
        "x-hidden": {"p": {"pattern": "^a", "patternProperties": {"^k": {}, "^a": {}}}}});
    let stats = check_schema(&light, &limits()).unwrap();
    assert_eq!(stats.patterns, 2, "distinct: ^a, ^k");
    assert_eq!(stats.subschemas, 3 + 1 + 2, "root, a, b; p once; its two");
}

/// Each regex fits alone, but not all of them together.
#[test]
fn a_schema_s_regexes_are_weighed_in_all() {
    let unicode = |i: usize| format!("^[\\p{{L}}\\p{{N}}_-]+{i}$");
    let one = check_schema(&string_property(&unicode(0)), &limits()).unwrap();
    assert!(one.pattern_weight > 40_000, "{}", one.pattern_weight);
    let n = (1_000_000 / one.pattern_weight + 1) as usize;
    let props: Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({"pattern": unicode(i)})))
        .collect();
    let s = json!({"type": "object", "properties": props});
    assert_eq!(
        check_schema(&s, &limits()),
        Err(SchemaLimitError::PatternsTooHeavy { limit: 1_000_000 })
    );
}

/// A budget shared by schemas refuses the one that does not fit and takes
/// nothing from it; a refused regex costs it as a heavy one.
#[test]
fn a_budget_refuses_without_taking() {
    let mut budget = SchemaBudget {
        subschemas: 100,
        patterns: 3,
        weight: 30_000,
    };
    let light = check_schema(&string_property("^a{10}$"), &limits()).unwrap();
    let heavy = check_schema(&string_property("^[\\p{L}\\p{N}_-]+$"), &limits()).unwrap();
    budget.charge(&light).unwrap();
    let before = budget;
    let err = budget.charge(&heavy).unwrap_err();
    assert_eq!(budget, before);
    assert!(err.to_string().contains("2 regexes of weight"), "{err}");
    budget.charge(&light).unwrap();
    budget.charge(&light).unwrap();
    assert_eq!(budget.patterns, 0);
    assert!(budget.charge(&light).is_err());
    let mut budget = SchemaBudget::PER_SOURCE;
    budget.spend_on_refused();
    assert_eq!(
        budget.weight,
        SchemaBudget::PER_SOURCE.weight - MAX_PATTERN_WEIGHT
    );
}

/// Values of the `regex` format longer than a schema regex may be are not
/// regexes here: the syntax check is quadratic in their named groups.
#[test]
fn regex_format_values_are_bounded() {
    let schema = json!({"$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object", "properties": {"r": {"type": "string", "format": "regex"}}});
    let v = crate::compile_value(&schema, crate::SchemaUse::Arguments).unwrap();
    assert!(v.is_valid(&json!({"r": "^(?<a>x)+$"})));
    assert!(!v.is_valid(&json!({"r": "("})));
    let groups: String = (0..1000).map(|i| format!("(?<g{i}>x)")).collect();
    assert!(groups.len() > crate::schema_regex::MAX_PATTERN_BYTES);
    assert!(jsonschema_regex::is_valid_ecma_regex(&groups));
    assert!(!v.is_valid(&json!({"r": groups})));
}
