use super::*;
use rmcp::model::JsonRpcMessage;
use tokio::io::AsyncWriteExt;

fn id(line: &str) -> Option<RequestId> {
    request_id(line.as_bytes())
}

#[test]
fn the_id_is_read_from_the_top_level_only() {
    let n = |v| Some(NumberOrString::Number(v));
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#), n(7));
    assert_eq!(id(r#" { "method" : "x" , "id" : -3 }"#), n(-3));
    assert_eq!(
        id(r#"{"params":{"id":1,"a":[{"id":2}]},"id":"abc"}"#),
        Some(NumberOrString::String("abc".into()))
    );
    assert_eq!(
        id(r#"{"params":"}{\"id\":9","id":4}"#),
        n(4),
        "braces and quotes in strings"
    );
    assert_eq!(id(r#"{"method":"x"}"#), None, "a notification");
    assert_eq!(id(r#"{"id":null}"#), None);
    assert_eq!(id(r#"{"id":1.5}"#), None);
    assert_eq!(id(r#"{"id":"a\"b"}"#), None, "escapes are not decoded");
    assert_eq!(id(r#"[{"id":1}]"#), None);
    assert_eq!(id(r#"{"params":[[[["#), None, "cut before its id");
    assert_eq!(id("garbage"), None);
    let deep = format!(
        r#"{{"params":{}{},"id":5}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(id(&deep), n(5), "depth is counted, not recursed into");
    let mut bad_utf8 = br#"{"id":3,"method":"tools/call","params":{"name":"#.to_vec();
    bad_utf8.extend_from_slice(b"\"\xff\xfe\"}}");
    assert_eq!(request_id(&bad_utf8), n(3));
}

fn refused(line: &[u8]) -> (i32, Option<RequestId>, String) {
    match parse_line(line) {
        Line::Refused(Answer::One(JsonRpcMessage::Error(e))) => {
            (e.error.code.0, e.id, e.error.message.to_string())
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn unreadable_requests_with_an_id_are_answered() {
    let seven = Some(NumberOrString::Number(7));
    let mut bad_utf8 = br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":""#.to_vec();
    bad_utf8.extend_from_slice(b"\xff\"}}\n");
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    for line in [
        bad_utf8,
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\ud800"}}"#.to_vec(),
        deep.into_bytes(),
        br#"{"jsonrpc":"2.0","id":7,"method":"ping"}{"jsonrpc":"2.0","id":8,"method":"ping"}"#
            .to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\xff\xfe".to_vec(),
    ] {
        let (code, id, message) = refused(&line);
        assert_eq!((code, &id), (-32700, &seven), "{message}");
        assert!(
            message.contains("not JSON this server can read"),
            "{message}"
        );
    }
    let (code, id, _) = refused(br#"{"jsonrpc":"2.0","id":7}"#);
    assert_eq!((code, id), (-32600, seven), "valid JSON, not a message");
}

#[test]
fn lines_without_an_id_are_skipped_and_messages_pass() {
    for line in [
        &b"garbage\n"[..],
        b"[[[[",
        b"\n",
        b"  \r\n",
        br#"{"method":"notifications/x","params":5}"#,
    ] {
        assert!(
            matches!(parse_line(line), Line::Skipped),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    let ping = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n";
    assert!(matches!(
        parse_line(ping),
        Line::Message(JsonRpcMessage::Request(_))
    ));
}

/// A request whose id is a number no request id can be here (a fraction,
/// an exponent, past `i64`) is answered -32600 with a null id, as JSON-RPC
/// answers an id it cannot read: it was dropped, and its client waited
/// forever. Ids of other types (objects, arrays, booleans) are not ids at
/// all, and such lines are dropped as before.
#[test]
fn a_request_with_a_number_id_out_of_range_is_answered_with_a_null_id() {
    for id in ["1.5", "18446744073709551615", "-2.5e-3"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let (code, answered_to, message) = refused(line.as_bytes());
        assert_eq!(code, -32600, "{id}");
        assert_eq!(answered_to, None, "{id}");
        assert!(
            message.contains(&format!("the id {id} is not")),
            "{message}"
        );
    }
    for id in ["true", "{}", "[1]", "null"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        assert!(matches!(parse_line(line.as_bytes()), Line::Skipped), "{id}");
    }
}

#[tokio::test]
async fn a_line_over_the_bound_is_refused_by_its_id_and_the_next_is_read() {
    let (mut w, r) = tokio::io::duplex(1 << 16);
    let mut reader = LineReader::new(r);
    let writer = tokio::spawn(async move {
        let head = br#"{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"x":""#;
        w.write_all(head).await.unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..17 {
            w.write_all(&chunk).await.unwrap();
        }
        w.write_all(b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .await
            .unwrap();
    });
    match reader.next().await {
        Line::Refused(Answer::One(JsonRpcMessage::Error(e))) => {
            assert_eq!(e.id, Some(NumberOrString::String("big".into())));
            assert!(
                e.error.message.contains("longer than"),
                "{}",
                e.error.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        reader.line.capacity() <= MAX_LINE_BYTES + (1 << 20),
        "the line was not kept whole"
    );
    assert!(matches!(reader.next().await, Line::Message(_)));
    writer.await.unwrap();
    assert!(matches!(reader.next().await, Line::End));
}

#[test]
fn a_request_of_too_many_values_is_refused_before_it_is_parsed() {
    let many = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"x","arguments":{{"a":[{}{{}}]}}}}}}"#,
        "{},".repeat(MAX_JSON_VALUES)
    );
    let (code, id, message) = refused(many.as_bytes());
    assert_eq!((code, id), (-32600, Some(NumberOrString::Number(9))));
    assert!(message.contains("JSON values"), "{message}");
    // Commas and brackets inside strings are text, not values.
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"s":"{}\"{}"}}}}"#,
        ",[{".repeat(MAX_JSON_VALUES),
        ",".repeat(10)
    );
    assert!(matches!(parse_line(text.as_bytes()), Line::Message(_)));
    assert_eq!(wasm_mcp_protocol::json_values(br#"[1,2,{"a":[3]}]"#), 5);
}

/// A JSON-RPC batch (removed from MCP in 2025-06-18) got no answer, and its
/// client waited: each request in it is answered -32600 by its id, in one
/// array; a batch of notifications only is dropped.
#[test]
fn each_request_of_a_batch_is_refused_by_its_id() {
    let batch = br#"[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"x","method":"tools/list"}]"#;
    let Line::Refused(answer @ Answer::Batch(_)) = parse_line(batch) else {
        panic!("a batch was not refused");
    };
    let answer = serde_json::to_value(&answer).unwrap();
    let ids: Vec<&serde_json::Value> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&serde_json::json!(5), &serde_json::json!("x")]);
    assert!(answer
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["error"]["code"] == -32600));
    let notes = br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    assert!(matches!(parse_line(notes), Line::Skipped));
}

/// `initialize` and `subscriptions/listen` are kept while their session or
/// stream lasts: over 64 KiB they are refused -32602 by their id (4 MB
/// `capabilities` kept 256 sessions at 1 GB); other requests are not.
#[test]
fn a_large_request_the_server_would_keep_is_refused() {
    let padding = "x".repeat(MAX_KEPT_REQUEST_BYTES);
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{"experimental":{{"pad":"{padding}"}}}},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
    );
    let listen = format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{{"_meta":{{"io.modelcontextprotocol/clientInfo":{{"name":"{padding}","version":"1"}}}},"notifications":{{"toolsListChanged":true}}}}}}"#
    );
    for (line, id) in [(initialize, 7), (listen, 8)] {
        let (code, answered_to, message) = refused(line.as_bytes());
        assert_eq!(code, -32602, "{message}");
        assert_eq!(answered_to, Some(RequestId::Number(id)));
        assert!(message.contains("at most 65536 bytes"), "{message}");
    }
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"a","content":"{padding}"}}}}}}"#
    );
    assert!(matches!(parse_line(call.as_bytes()), Line::Message(_)));
    let small = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    assert!(matches!(parse_line(small.as_bytes()), Line::Message(_)));
}

/// Bytes alone do not bound what a kept request costs once parsed: 64 KiB
/// of one-member objects in `capabilities` took ~6 MB a session (256
/// sessions 1.6 GB; a helper's find). Past `MAX_KEPT_REQUEST_VALUES` JSON
/// values such a request is refused too; a tool call of as many is not.
#[test]
fn a_kept_request_of_many_small_values_is_refused() {
    let objects = vec![r#"{"":0}"#; MAX_KEPT_REQUEST_VALUES].join(",");
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{"experimental":{{"x":[{objects}]}}}},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
    );
    assert!(initialize.len() < MAX_KEPT_REQUEST_BYTES);
    let (code, answered_to, message) = refused(initialize.as_bytes());
    assert_eq!(code, -32602, "{message}");
    assert_eq!(answered_to, Some(RequestId::Number(7)));
    assert!(message.contains("JSON values"), "{message}");
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"x","arguments":{{"a":[{objects}]}}}}}}"#
    );
    assert!(matches!(parse_line(call.as_bytes()), Line::Message(_)));
}
