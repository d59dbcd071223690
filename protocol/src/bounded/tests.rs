use super::*;
use crate::schema_limits::SchemaLimits;
use serde_json::{json, Map};
use std::time::Instant;

/// Within the static limits but priced high: `items` applies an 11-link
/// `anyOf` chain (~8k expanded subschemas) to every element, and every
/// branch fails.
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
    Arc::new(
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap(),
    )
}

/// A budget of `ms` for each step, explaining at any price.
fn budget(ms: u64) -> Validation {
    Validation::new(ValidationBudget {
        time: Duration::from_millis(ms),
        max_explain_cost: u64::MAX / 2,
        ..ValidationBudget::default()
    })
}

/// A job priced over the inline band runs off the executor and ends at its
/// budget: the caller gets `BudgetExceeded` while the executor keeps
/// running (a sleeping job stands for a slow validation: within its price a
/// real one is only slow on a slow machine).
#[tokio::test(flavor = "current_thread")]
async fn a_slow_job_ends_at_its_budget_and_the_executor_keeps_running() {
    let v = budget(300);
    let cost = v.budget().inline_cost + 1;
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
    let job = || std::thread::sleep(Duration::from_secs(2));
    let (result, ticked_at) = tokio::join!(v.run(None, cost, job), ticker);
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
        .validate(None, &schema, json!({"xs": vec![1; 1000]}))
        .await
        .unwrap_err();
    assert!(matches!(err, ValidationFailure::TooCostly { .. }), "{err}");
    assert!(err.to_string().contains("validation budget"));
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn cheap_and_off_thread_validations_give_the_same_answers() {
    let s = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let schema = Arc::new(
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap(),
    );
    for inline_cost in [u64::MAX / 2, 0] {
        let v = Validation::new(ValidationBudget {
            inline_cost,
            max_cost: u64::MAX,
            ..ValidationBudget::default()
        });
        assert_eq!(
            v.validate(None, &schema, json!({"n": 1})).await.unwrap(),
            json!({"n": 1})
        );
        let err = v
            .validate(None, &schema, json!({"n": "x"}))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ValidationFailure::Invalid(m) if m.contains("/n")),
            "{err}"
        );
        assert_eq!(
            v.check_result(None, r#"{"n":2}"#, Some(&schema))
                .await
                .unwrap(),
            json!({"n": 2})
        );
        let e = v
            .check_result(None, r#"{"m":2}"#, Some(&schema))
            .await
            .unwrap_err();
        assert!(e.contains("outputSchema"), "{e}");
        assert!(v
            .check_result(None, "[1]", None)
            .await
            .unwrap_err()
            .contains("not a JSON object"));
    }
}

/// A check past its budget is a contract violation that says so. The check
/// is real and slow for its 1 ms budget: 30 patterns, each a pass over a
/// 3.5 MiB string (priced ~1.8M, tens of ms at the regex engine's speed).
#[tokio::test]
async fn overrun_result_check_is_a_clear_contract_message() {
    let passes: Vec<Value> = (0..30).map(|_| json!({"pattern": "^a*$"})).collect();
    let s = json!({"type": "object", "properties": {"s": {"allOf": passes}}});
    let schema = Arc::new(
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap(),
    );
    let text = json!({"s": "a".repeat(7 << 19)}).to_string();
    let v = budget(1);
    let price = v.cost(&schema, &serde_json::from_str(&text).unwrap());
    assert!(
        price > v.budget().inline_cost && price <= v.budget().max_cost,
        "{price}"
    );
    let e = v
        .check_result(None, &text, Some(&schema))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        "result could not be checked against the tool's outputSchema: validation did not finish within its budget of 1ms"
    );
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
    let schema = Arc::new(
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap(),
    );
    let v = Validation::shared();
    let long = json!({"a": "a".repeat(4 << 20)});
    assert!(v.cost(&schema, &long) <= v.budget().inline_cost);
    let started = Instant::now();
    let ValidationFailure::Invalid(why) = v.validate(None, &schema, long).await.unwrap_err() else {
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
    let ValidationFailure::Invalid(why) = v
        .validate(None, &schema, json!({"a": "x"}))
        .await
        .unwrap_err()
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
    let compile = |s: Value| {
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap()
    };
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

/// A long `enum` weighs one subschema more per 32 of its nodes: the
/// validator compares a value with each option in turn. 499 values against
/// 32,001 mixed options took ~100 ms inline, priced 1,000 (a helper's find).
#[test]
fn long_enums_weigh_by_their_length() {
    use crate::schema_limits::LITERAL_NODES_PER_WEIGHT;
    let options: Vec<Value> = (0..32_000).map(|_| json!(0)).chain([json!(1.5)]).collect();
    let s = json!({"type": "object", "additionalProperties": {"enum": options}});
    let schema =
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap();
    assert_eq!(schema.expanded(), 1 + 1 + 32_002 / LITERAL_NODES_PER_WEIGHT);
    let value: Map<String, Value> = (0..499).map(|i| (i.to_string(), json!(1.5))).collect();
    let budget = ValidationBudget::default();
    assert!(schema.cost(&Value::Object(value), u64::MAX) > 100 * budget.inline_cost);
}

/// `uniqueItems` compares the items of an array, through a weak hash that
/// items can be made to collide on: every pair can be compared. 40,000
/// colliding pairs of integers near 2^63, priced 240,000, took 7.7 s (a
/// helper's find); they are now priced by their pairs and refused unrun,
/// while an ordinary list of 1,000 tags stays well within the budget.
#[test]
fn unique_items_are_priced_by_the_pairs_they_compare() {
    let s = json!({"type": "object",
        "properties": {"a": {"type": "array", "uniqueItems": true}}});
    let schema =
        CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results).unwrap();
    let budget = ValidationBudget::default();
    let colliding: Vec<Value> = (0..40_000u64)
        .map(|i| json!([(1u64 << 63) + i % 1000, (1u64 << 63) + i / 1000]))
        .collect();
    let attack = json!({ "a": colliding });
    assert!(schema.cost(&attack, budget.max_cost) > budget.max_cost);
    let tags: Vec<String> = (0..1000).map(|i| format!("tag-{i}")).collect();
    let tags = json!({ "a": tags });
    let price = schema.cost(&tags, budget.max_cost);
    assert!(price < budget.max_cost / 50, "{price}");
    // Without `uniqueItems` the same arrays are priced by their nodes only.
    let plain = json!({"type": "object", "properties": {"a": {"type": "array"}}});
    let plain = CheckedSchema::compile(&plain, &SchemaLimits::default(), crate::SchemaUse::Results)
        .unwrap();
    assert!(plain.cost(&attack, budget.max_cost) < budget.max_cost);
}

/// Under a failing `anyOf` (or `oneOf`), jsonschema builds every error of
/// the branches, even for the first error: a `required` list of 9,000
/// names against 247 empty objects, priced 996, built 2.2M errors (0.8 s,
/// 736 MB; a helper's find). Explaining counts every name: the failure is
/// reported without its errors, at once.
#[tokio::test(flavor = "current_thread")]
async fn name_lists_count_when_a_failure_is_explained() {
    let names: Vec<String> = (0..9000).map(|i| i.to_string()).collect();
    for keyword in [
        json!({"anyOf": [{"items": {"required": names}}]}),
        json!({"oneOf": [true, true, {"items": {"required": names}}]}),
        json!({"anyOf": [{"items": {"dependentRequired": {"x": names}}}]}),
    ] {
        let s = json!({"type": "object", "properties": {"a": keyword}});
        let schema = Arc::new(
            CheckedSchema::compile(&s, &SchemaLimits::default(), crate::SchemaUse::Results)
                .unwrap(),
        );
        let value = json!({"a": vec![json!({"x": 0}); 160]});
        let v = Validation::shared();
        // Cheap to check (about 1,000 to 2,000 units).
        assert!(v.cost(&schema, &value) <= 2 * v.budget().inline_cost);
        let started = Instant::now();
        let ValidationFailure::Invalid(why) = v.validate(None, &schema, value).await.unwrap_err()
        else {
            panic!("invalid")
        };
        assert!(
            why.contains("its errors were not listed (listing them would cost"),
            "{why}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}

/// One plugin's checks, slow but each within its price, hold only its own
/// lane: another plugin's check, started behind a flood of them, runs at
/// once on the thread its lane leaves free. (Sleeping jobs stand for
/// checks slow within their price.) When the threads were one queue, the
/// second plugin's check waited behind the flood past its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plugins_slow_checks_leave_other_plugins_a_thread() {
    let v = Arc::new(budget(1000));
    assert_eq!(v.budget().threads, 2);
    let cost = v.budget().inline_cost + 1;
    let hostile = Arc::new(v.lane());
    let flood: Vec<_> = (0..8).map(|_| sleeping_job(&v, &hostile, 600)).collect();
    // The flood has a thread before the other plugin's check starts.
    wait_for_taken_threads(&v, 1).await;
    let honest = v.lane();
    let started = Instant::now();
    let quick = || {
        std::thread::sleep(Duration::from_millis(20));
        7
    };
    assert_eq!(v.run(Some(&honest), cost, quick).await, Ok(7));
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // The flood's own later checks are the ones that wait past the budget.
    let mut over = 0;
    for job in flood {
        if job.await.unwrap() == Err(ValidationFailure::BudgetExceeded(Duration::from_secs(1))) {
            over += 1;
        }
    }
    assert!(over >= 6, "{over} of the flood's 8 checks went over");
}

/// A lane holds half of the threads, at least one.
#[test]
fn a_lane_holds_half_of_the_threads() {
    for (threads, share) in [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (8, 4)] {
        let v = Validation::new(ValidationBudget {
            threads,
            ..ValidationBudget::default()
        });
        assert_eq!(v.lane().permits.available_permits(), share, "{threads}");
    }
}

/// Two plugins whose checks overrun their budget (each keeps running on
/// its thread) leave the shared threads free once their callers' deadlines
/// pass: a third plugin's check, started while both threads are taken,
/// runs once they are given back, within its own budget. When overrunning
/// jobs kept their shared permits, the two held every thread until they
/// ended and the third check went over its budget (a reviewer's find).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrunning_checks_give_their_shared_thread_back_at_the_deadline() {
    let v = Arc::new(budget(1000));
    let cost = v.budget().inline_cost + 1;
    let t0 = Instant::now();
    let hostile: Vec<_> = (0..2)
        .map(|_| sleeping_job(&v, &Arc::new(v.lane()), 2500))
        .collect();
    wait_for_taken_threads(&v, 2).await;
    // Half-way through the overruns' budget: their deadlines pass ~500 ms
    // before this check's.
    tokio::time::sleep_until((t0 + Duration::from_millis(500)).into()).await;
    let honest = v.lane();
    let quick = || {
        std::thread::sleep(Duration::from_millis(20));
        7
    };
    assert_eq!(v.run(Some(&honest), cost, quick).await, Ok(7));
    for job in hostile {
        assert_eq!(
            job.await.unwrap(),
            Err(ValidationFailure::BudgetExceeded(Duration::from_secs(1)))
        );
    }
}

/// A job that panics gives both its permits back (the panic reaches the
/// caller), and so does a caller that stops waiting before its job starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_come_back_after_a_panic_and_a_cancelled_wait() {
    let v = Arc::new(budget(1000));
    let cost = v.budget().inline_cost + 1;
    let lane = Arc::new(v.lane());
    let panicked = tokio::spawn({
        let (v, lane) = (v.clone(), lane.clone());
        async move { v.run(Some(&lane), cost, || panic!("a job's bug")).await }
    });
    assert!(panicked.await.unwrap_err().is_panic());
    assert_eq!(v.permits.available_permits(), 2);
    assert_eq!(lane.permits.available_permits(), 1);
    // A wait dropped while the lane's only permit is taken by another job.
    let slow = v.run(Some(&lane), cost, || {
        std::thread::sleep(Duration::from_millis(300))
    });
    let waiting = v.run(Some(&lane), cost, || ());
    let (slow, waiting) = tokio::join!(slow, async {
        tokio::time::timeout(Duration::from_millis(50), waiting).await
    });
    assert_eq!(slow, Ok(()));
    assert!(waiting.is_err(), "the second job waited for the lane");
    assert_eq!(v.permits.available_permits(), 2);
    assert_eq!(lane.permits.available_permits(), 1);
}

/// A job of `lane` priced off the executor that sleeps `ms`, on a task.
fn sleeping_job(
    v: &Arc<Validation>,
    lane: &Arc<Lane>,
    ms: u64,
) -> tokio::task::JoinHandle<Result<(), ValidationFailure>> {
    let (v, lane) = (v.clone(), lane.clone());
    let cost = v.budget().inline_cost + 1;
    tokio::spawn(async move {
        let sleep = move || std::thread::sleep(Duration::from_millis(ms));
        v.run(Some(&lane), cost, sleep).await
    })
}

/// Waits until at least `n` shared threads are taken.
async fn wait_for_taken_threads(v: &Validation, n: usize) {
    let taken = || v.budget().threads - v.permits.available_permits() >= n;
    wait_until(5000, "the jobs never ran", taken).await;
}

/// Waits until `done`, failing with `what` after `ms`.
async fn wait_until(ms: u64, what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_millis(ms), "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A caller that stops waiting (its call cancelled) gives the shared
/// thread back at once; the job, which cannot be stopped, keeps its lane's
/// permit until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_caller_gives_the_shared_thread_back() {
    let v = Arc::new(budget(5000));
    let lane = Arc::new(v.lane());
    let job = sleeping_job(&v, &lane, 1500);
    wait_for_taken_threads(&v, 1).await;
    job.abort();
    wait_until(1000, "not given back", || {
        v.permits.available_permits() == 2
    })
    .await;
    assert_eq!(lane.permits.available_permits(), 0, "the job still runs");
    let lane_back = || lane.permits.available_permits() == 1;
    wait_until(5000, "the lane never came back", lane_back).await;
}

/// Work that names no lane runs in one of `threads` permits: its jobs past
/// their deadline are bounded like a plugin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_without_a_lane_is_bounded_past_its_deadline() {
    let v = Arc::new(budget(200));
    let cost = v.budget().inline_cost + 1;
    let overruns: Vec<_> = (0..4)
        .map(|_| {
            let v = v.clone();
            tokio::spawn(async move {
                let sleep = || std::thread::sleep(Duration::from_millis(1200));
                v.run(None, cost, sleep).await
            })
        })
        .collect();
    for job in overruns {
        assert_eq!(
            job.await.unwrap(),
            Err(ValidationFailure::BudgetExceeded(Duration::from_millis(
                200
            )))
        );
    }
    // Two started (the unlaned lane's two permits); the other two waited
    // for it past their deadline and never ran.
    assert_eq!(v.unlaned.permits.available_permits(), 0);
    assert_eq!(v.permits.available_permits(), 2);
}
