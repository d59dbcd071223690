//! A tool: a typed function plus what `list-tools` says about it.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::ToolError;

/// `annotations` of `wit/tool.wit`: hints for the client, never a security
/// boundary. Default: all false (a sandboxed worktree tool is never
/// open-world).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// One `tool-descriptor`, with the schemas as JSON values (`output_schema`
/// is `None` only for a [`Tool::raw`] tool given none).
#[derive(Clone, Debug, PartialEq)]
pub struct Descriptor {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Annotations,
}

type Run = Box<dyn Fn(&str) -> Result<String, ToolError>>;

/// The JSON text of a `T`, written by the tool itself (see
/// [`Tool::encoded`]). Nothing here checks that the text is a `T`: the
/// host checks every result against the tool's output schema.
pub struct Encoded<T> {
    json: String,
    of: PhantomData<fn() -> T>,
}

impl<T> Encoded<T> {
    /// `json`, the JSON text of a `T` (the host checks it against the
    /// tool's output schema).
    pub fn new(json: String) -> Self {
        Encoded {
            json,
            of: PhantomData,
        }
    }
}

/// Text the SDK takes either as a literal or built at run time.
type Text = Cow<'static, str>;

/// Where a schema comes from: derived from a type (on demand), or given.
enum Schema {
    Derived(fn() -> Value),
    Given(Value),
}

impl Schema {
    fn value(&self) -> Value {
        match self {
            Schema::Derived(f) => f(),
            Schema::Given(v) => v.clone(),
        }
    }
}

/// A tool: built from `fn(Args) -> Result<Out, ToolError>` (schemas
/// derived, lazily, only for `list-tools`, from `Args` and `Out`), or with
/// [`Tool::raw`] from JSON text in and out and schemas given as values.
pub struct Tool {
    name: Text,
    title: Option<Text>,
    description: Option<Text>,
    annotations: Annotations,
    input_schema: Schema,
    output_schema: Option<Schema>,
    run: Run,
}

impl Tool {
    /// `name` must match `[A-Za-z0-9_-]{1,64}`. `Args` and `Out` must be
    /// structs (their schemas are objects) and not recursive (the host
    /// refuses `$ref` cycles). The description is `Args`' doc comment unless
    /// [`Tool::description`] sets one.
    pub fn new<A, R, F>(name: &'static str, f: F) -> Tool
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize + JsonSchema,
        F: Fn(A) -> Result<R, ToolError> + 'static,
    {
        Tool::typed::<A, R>(
            name,
            Box::new(move |args_json| {
                let out = f(parse(name, args_json)?)?;
                encode(&out).map_err(|e| ToolError::internal(format!("result of {name}: {e}")))
            }),
        )
    }

    /// Like [`Tool::new`], for a tool that writes its result's JSON text
    /// itself ([`Encoded`]), e.g. while it reads a large file, instead of
    /// building the value and having it encoded after. The output schema
    /// is still derived from `R`, and the host checks the text against it
    /// like any result.
    pub fn encoded<A, R, F>(name: &'static str, f: F) -> Tool
    where
        A: DeserializeOwned + JsonSchema,
        R: JsonSchema,
        F: Fn(A) -> Result<Encoded<R>, ToolError> + 'static,
    {
        Tool::typed::<A, R>(
            name,
            Box::new(move |args_json| Ok(f(parse(name, args_json)?)?.json)),
        )
    }

    fn typed<A: JsonSchema, R: JsonSchema>(name: &'static str, run: Run) -> Tool {
        Tool {
            name: Cow::Borrowed(name),
            title: None,
            description: None,
            annotations: Annotations::default(),
            input_schema: Schema::Derived(schema_of::<A>),
            output_schema: Some(Schema::Derived(schema_of::<R>)),
            run,
        }
    }

    /// A tool that takes the arguments and returns its result as JSON
    /// text, unparsed, with a hand-written `input_schema` published as
    /// given (keys such as `$schema`, `$defs`, `$ref` included) and no
    /// output schema unless [`Tool::output_schema`] sets one. For what
    /// types cannot say, e.g. a schema that must reach clients verbatim,
    /// or tools made at run time. Nothing is checked here: the host
    /// refuses a descriptor that breaks the contract (`wasm-mcp inspect`
    /// says which and why), and a result must still be a JSON object.
    pub fn raw<F>(name: impl Into<Text>, input_schema: Value, f: F) -> Tool
    where
        F: Fn(&str) -> Result<String, ToolError> + 'static,
    {
        Tool {
            name: name.into(),
            title: None,
            description: None,
            annotations: Annotations::default(),
            input_schema: Schema::Given(input_schema),
            output_schema: None,
            run: Box::new(f),
        }
    }

    /// Publishes `schema` as the output schema (replaces a derived one).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(Schema::Given(schema));
        self
    }

    pub fn title(mut self, title: impl Into<Text>) -> Self {
        self.title = Some(title.into());
        self
    }
    pub fn description(mut self, description: impl Into<Text>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// The tool does not modify its environment.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self
    }
    /// The tool may overwrite or delete.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }
    /// Calling it twice with the same arguments has no further effect.
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = true;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor `list-tools` returns (generates the schemas). A
    /// derived input schema's `description` (the argument type's doc
    /// comment) moves to the tool's description.
    pub fn descriptor(&self) -> Descriptor {
        let mut input = self.input_schema.value();
        let doc = match self.input_schema {
            Schema::Derived(_) => take_key(&mut input, "description"),
            Schema::Given(_) => None,
        };
        let description = match (&self.description, doc) {
            (Some(d), _) => d.to_string(),
            (None, Some(Value::String(d))) => d,
            (None, _) => String::new(),
        };
        Descriptor {
            name: self.name.to_string(),
            title: self.title.as_ref().map(|t| t.to_string()),
            description,
            input_schema: input,
            output_schema: self.output_schema.as_ref().map(Schema::value),
            annotations: self.annotations,
        }
    }
}

/// All descriptors, in order.
pub fn descriptors(tools: &[Tool]) -> Vec<Descriptor> {
    tools.iter().map(Tool::descriptor).collect()
}

/// Runs tool `name` on `args_json`; the result object as JSON text.
pub fn call(tools: &[Tool], name: &str, args_json: &str) -> Result<String, ToolError> {
    match tools.iter().find(|t| t.name == name) {
        Some(t) => (t.run)(args_json),
        None => Err(ToolError::new(
            crate::ErrorCode::UnknownTool,
            format!("unknown tool `{name}`"),
        )),
    }
}

fn parse<A: DeserializeOwned>(tool: &str, args_json: &str) -> Result<A, ToolError> {
    let text = if args_json.trim().is_empty() {
        "{}"
    } else {
        args_json
    };
    serde_json::from_str(text)
        .map_err(|e| ToolError::invalid(format!("invalid arguments for {tool}: {e}")))
}

/// Draft 2020-12, everything inlined (no `$defs` unless a type is
/// recursive), without the `$schema` and `title` keys at the root (the host
/// needs neither; the title would only repeat the Rust type's name).
fn schema_of<T: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    take_key(&mut schema, "title");
    tidy(&mut schema);
    schema
}

/// What schemars writes as `format` for Rust's number types. None is a
/// JSON Schema format: validators ignore them, and clients that check
/// formats strictly (AJV: the TypeScript SDK, the Inspector) warned about
/// each on every listing (`minimum` and `maximum` carry the range).
const NUMBER_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "int", "uint8", "uint16", "uint32", "uint64",
    "uint128", "uint", "float", "double",
];

/// Doc comments arrive one source line per `\n`: rejoin the lines of each
/// paragraph with a space, keep blank-line paragraph breaks.
fn unwrap_doc(doc: &str) -> String {
    let paragraphs: Vec<String> = doc
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .collect();
    paragraphs.join("\n\n")
}

/// Descriptions rejoined ([`unwrap_doc`]) and schemars' number formats
/// ([`NUMBER_FORMATS`]) dropped, throughout the schema.
fn tidy(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let number_format = o
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| NUMBER_FORMATS.contains(&f));
            if number_format {
                o.remove("format");
            }
            for (k, child) in o.iter_mut() {
                match child {
                    Value::String(s) if k == "description" => *s = unwrap_doc(s),
                    _ => tidy(child),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn take_key(schema: &mut Value, key: &str) -> Option<Value> {
    schema
        .as_object_mut()
        .and_then(|o: &mut Map<String, Value>| o.remove(key))
}

#[cfg(test)]
mod tests;

/// The result as JSON text. `sonic-rs` finds the bytes a JSON string must
/// escape 16 at a time (wasm SIMD where the build enables `simd128`, as
/// `scripts/build-plugins.sh` does); `serde_json` checks them one by one,
/// which was the guest's largest cost on a 1.9 MB `read_file`. Same JSON,
/// fields in the same order.
fn encode<R: Serialize>(out: &R) -> Result<String, sonic_rs::Error> {
    sonic_rs::to_string(out)
}
