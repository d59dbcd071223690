//! The tool contract shared by the server (`wasm-mcp-host`) and the client
//! (`wasm-mcp-harness`), wasmtime-free so it can be unit-tested and fuzzed
//! cheaply: tool names, object schemas, argument and result validation,
//! text bounds, error kinds, pagination cursors, the JSON value count of a
//! message.

#[cfg(feature = "bounded")]
pub mod bounded;
pub mod checked_schema;
pub mod cursor;
pub mod errors;
pub mod header_params;
pub mod json_values;
pub mod multiple_of;
pub mod names;
pub mod schema;
pub mod schema_limits;
pub mod schema_regex;
pub mod text;
pub mod validate;

#[cfg(feature = "bounded")]
pub use bounded::{Lane, Validation, ValidationBudget, ValidationFailure};
pub use checked_schema::{CheckedSchema, SchemaError};
pub use cursor::{decode_cursor, encode_cursor};
pub use errors::{ErrorKind, CALL_ID_META, ERROR_KIND_META};
pub use json_values::{json_values, parsed_bytes, ByteCounter};
pub use names::{quoted_name, shown_name, valid_tool_name, TOOL_NAME_RULE};
pub use schema::{
    compile_schema, compile_value, is_object_schema, parse_object_schema, MissingType, SchemaUse,
};
pub use schema_limits::{
    check_schema, check_schema_text, SchemaBudget, SchemaLimitError, SchemaLimits,
};
pub use text::{cap_description, display_clipped, MAX_DESCRIPTION, SHOWN_TEXT_BYTES};
pub use validate::{check_result, validate};
