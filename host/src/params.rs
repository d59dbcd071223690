//! Malformed params of a method we implement are `-32602 Invalid params`
//! with a message naming the problem. (rmcp parses requests into an
//! untagged enum: a known method whose params do not fit its type falls
//! through to `CustomRequest`, which would otherwise be `-32601`.)

use rmcp::model::{
    CallToolRequestParams, CustomRequest, ErrorCode, InitializeRequestParams,
    PaginatedRequestParams, SubscriptionsListenRequestParams,
};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

/// The answer to a request rmcp could not parse: `-32602` naming the
/// problem for a method this server implements, else `-32601`.
pub fn unparsed_request(request: &CustomRequest) -> McpError {
    let method = request.method.as_str();
    let params = request.params.clone().unwrap_or_else(|| json!({}));
    // What serde says about params that do not parse as `$t`.
    macro_rules! serde_says {
        ($t:ty) => {
            serde_json::from_value::<$t>(params.clone())
                .err()
                .map(|e| e.to_string())
        };
    }
    let problem = match method {
        "tools/call" => tools_call_problem(&params).or_else(|| serde_says!(CallToolRequestParams)),
        "tools/list" => cursor_problem(&params).or_else(|| serde_says!(PaginatedRequestParams)),
        "initialize" => serde_says!(InitializeRequestParams),
        "subscriptions/listen" => {
            listen_problem(&params).or_else(|| serde_says!(SubscriptionsListenRequestParams))
        }
        _ => return McpError::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None),
    };
    let problem = problem.unwrap_or_else(|| "params do not fit the method".into());
    McpError::invalid_params(
        format!("invalid params for {method}: {problem}"),
        Some(json!({"method": method})),
    )
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The params, which must be an object.
fn object(params: &Value) -> Result<&serde_json::Map<String, Value>, String> {
    params
        .as_object()
        .ok_or_else(|| format!("params must be an object, got {}", type_name(params)))
}

fn tools_call_problem(params: &Value) -> Option<String> {
    let obj = match object(params) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    match obj.get("name") {
        None => return Some("`name` is missing".into()),
        Some(Value::String(_)) => {}
        Some(v) => return Some(format!("`name` must be a string, got {}", type_name(v))),
    }
    match obj.get("arguments") {
        None | Some(Value::Object(_)) => None,
        Some(v) => Some(format!(
            "`arguments` must be an object, got {}",
            type_name(v)
        )),
    }
}

fn cursor_problem(params: &Value) -> Option<String> {
    let obj = match object(params) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    match obj.get("cursor") {
        None | Some(Value::String(_)) => None,
        Some(v) => Some(format!("`cursor` must be a string, got {}", type_name(v))),
    }
}

fn listen_problem(params: &Value) -> Option<String> {
    let obj = match object(params) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    match obj.get("notifications") {
        None => Some("`notifications` is missing".into()),
        Some(Value::Object(_)) => None,
        Some(v) => Some(format!(
            "`notifications` must be an object, got {}",
            type_name(v)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(method: &str, params: Value) -> McpError {
        unparsed_request(&CustomRequest::new(method, Some(params)))
    }

    #[test]
    fn a_known_method_with_bad_params_is_invalid_params_naming_the_field() {
        let e = answer("tools/call", json!({"arguments": {}}));
        assert_eq!(e.code.0, -32602);
        assert!(e.message.contains("`name` is missing"), "{}", e.message);
        let e = answer("tools/call", json!({"name": "x", "arguments": "{}"}));
        assert_eq!(e.code.0, -32602);
        assert!(
            e.message
                .contains("`arguments` must be an object, got a string"),
            "{}",
            e.message
        );
        let e = answer("tools/list", json!({"cursor": 7}));
        assert!(
            e.message.contains("`cursor` must be a string"),
            "{}",
            e.message
        );
        let e = answer("initialize", json!({"protocolVersion": "2025-11-25"}));
        assert_eq!(e.code.0, -32602);
        assert!(e.message.contains("missing field"), "{}", e.message);
        let e = answer("subscriptions/listen", json!({}));
        assert!(
            e.message.contains("`notifications` is missing"),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_unknown_method_stays_method_not_found() {
        let e = answer("prompts/get", json!({"nope": 1}));
        assert_eq!(e.code.0, -32601);
        assert_eq!(e.message, "prompts/get");
    }
}
