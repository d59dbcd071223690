use super::*;
use rmcp::model::NumberOrString;
use serde_json::json;

fn message(v: serde_json::Value) -> RxJsonRpcMessage<RoleServer> {
    serde_json::from_value(v).unwrap()
}

fn call(id: i64) -> RxJsonRpcMessage<RoleServer> {
    message(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {}}}))
}

fn id(n: i64) -> RequestId {
    NumberOrString::Number(n)
}

#[test]
fn a_request_is_counted_until_answered_and_its_id_is_refused_meanwhile() {
    let u = Unanswered::new(Duration::from_secs(60));
    assert_eq!(u.admit(&call(1)), Admission::Pass);
    assert_eq!(u.admit(&call(2)), Admission::Pass);
    assert_eq!(u.counted(), 2);
    assert_eq!(u.admit(&call(1)), Admission::Duplicate(id(1)));
    assert_eq!(u.counted(), 2, "a refused duplicate is not counted");
    u.answered(&id(1));
    assert_eq!(u.counted(), 1);
    assert_eq!(
        u.admit(&call(1)),
        Admission::Pass,
        "an answered id may be used again"
    );
}

/// A cancelled request stops counting, but its id stays taken (a request
/// reusing it at once got the cancelled call's result, and its own was
/// never sent) until its answer, which is dropped, or until it is stale.
#[test]
fn a_cancellation_ends_its_request_and_listen_streams_are_not_counted() {
    let u = Unanswered::new(Duration::from_secs(60));
    u.admit(&call(7));
    u.admit(&message(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7}}),
    ));
    assert_eq!(u.counted(), 0);
    assert_eq!(u.admit(&call(7)), Admission::ReusesCancelled(id(7)));
    assert!(
        u.drops_answer(&id(7)),
        "the cancelled call's answer is dropped"
    );
    assert_eq!(u.admit(&call(7)), Admission::Pass, "then the id is free");
    assert!(!u.drops_answer(&id(7)), "a live request's answer goes out");
    u.admit(&message(
        json!({"jsonrpc": "2.0", "id": "s", "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true}}}),
    ));
    assert_eq!(u.counted(), 1, "the new request 7, not the listen stream");
}

#[test]
fn stale_entries_stop_counting() {
    let u = Unanswered::new(Duration::from_millis(20));
    u.admit(&call(1));
    assert_eq!(u.counted(), 1);
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(u.counted(), 0);
    assert_eq!(u.admit(&call(1)), Admission::Pass);
}

#[tokio::test]
async fn a_waiter_wakes_when_an_answer_frees_room() {
    let u = std::sync::Arc::new(Unanswered::new(Duration::from_secs(60)));
    u.admit(&call(1));
    u.admit(&call(2));
    let waiter = tokio::spawn({
        let u = u.clone();
        async move { u.until_fewer_than(2).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "two unanswered: no room");
    u.answered(&id(2));
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the answer")
        .unwrap();
}

/// Cancelled ids are the client's bytes kept until stale: one longer than
/// `MAX_KEPT_CANCELLED_ID` is let go at once, and at most
/// `MAX_KEPT_CANCELLED` are kept, the oldest let go first (100 KiB ids
/// cancelled in a loop held 262 MB).
#[test]
fn cancelled_ids_kept_are_few_and_short() {
    let u = Unanswered::new(Duration::from_secs(60));
    let cancel = |id: serde_json::Value| {
        message(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}}),
        )
    };
    let long = "x".repeat(MAX_KEPT_CANCELLED_ID + 1);
    u.admit(&message(
        json!({"jsonrpc": "2.0", "id": long, "method": "ping"}),
    ));
    u.admit(&cancel(json!(long)));
    let again = message(json!({"jsonrpc": "2.0", "id": long, "method": "ping"}));
    assert_eq!(
        u.admit(&again),
        Admission::Pass,
        "a long cancelled id is not kept"
    );
    for n in 0..=MAX_KEPT_CANCELLED as i64 {
        u.admit(&call(1000 + n));
        u.admit(&cancel(json!(1000 + n)));
    }
    assert_eq!(
        u.admit(&call(1000)),
        Admission::Pass,
        "the oldest was let go"
    );
    assert_eq!(u.admit(&call(1001)), Admission::ReusesCancelled(id(1001)));
}
