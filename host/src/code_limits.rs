//! What a component's code may cost to compile, judged from its bytes
//! before any compiler sees them. Compiling is not bounded by the load
//! deadline (it runs before the plugin's first instruction), and its memory
//! is the server's: a 4 MB component of 1,000,000 empty functions took
//! 6.2 GB and 11–26 s to compile, one function of 2.5 million nested blocks
//! 4.6 GB (a helper's find). The bounds sit far above real plugins: the
//! Python sample (an interpreter and its libraries) has 13,353 functions
//! (the bound is 100,000), its largest 427 KB (4 MiB), blocks nested 781
//! deep (10,000).

use wasmparser::{Operator, Parser, Payload};

/// Functions defined by all the core modules of one component, at most.
pub const MAX_FUNCTIONS: u32 = 100_000;

/// Bytes of all function bodies, at most.
pub const MAX_CODE_BYTES: u64 = 64 << 20;

/// Bytes of one function body, at most.
pub const MAX_FUNCTION_BYTES: u32 = 4 << 20;

/// Open blocks (`block`, `loop`, `if`, `try_table`) in one function, at
/// most at once.
pub const MAX_NESTING: u32 = 10_000;

/// Bytes of type and linking declarations (core and component type
/// sections, imports, exports, aliases, instances, canonical functions),
/// at most. Each is a host structure once compiled, many times its size:
/// a 246 MB section of 490,000 unused record types loaded, took 8 s to
/// compile and kept 4.5 GB for the server's life (a helper's find).
pub const MAX_DECLARATION_BYTES: u64 = 4 << 20;

/// Items of all element segments (function references put in tables), at
/// most. An item is one byte in the binary and ~7 KB at load (measured
/// here: 10,000 items 90 MB, 100,000 items 710 MB over an empty plugin's
/// 47 MB): one unused segment of 1,000,000 items in a 1.1 MB component
/// passed 4 GB, 10,000,000 took 22 GB (a helper's find). The JavaScript
/// sample has 7,831, the Python sample 5,756.
pub const MAX_ELEMENT_ITEMS: u64 = 16_384;

/// Instances one component may expand to, at most: wasmtime inlines every
/// component it instantiates, so components nested 30 deep, each
/// instantiating the one below twice, were 2^30 instances from 1.5 KB and
/// took 3 GB in 6 s to compile (a helper's find; the compile child's
/// memory bound stops it too, after seconds and gigabytes). Counted as an
/// upper bound: a component's own core instances, plus, for each component
/// it instantiates, the most any component defined before it expands to.
/// The project's plugins expand to a few dozen.
pub const MAX_INSTANCES: u64 = 10_000;

/// What the component holds, as far as the limits look.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CodeShape {
    pub functions: u32,
    pub code_bytes: u64,
    pub largest_function: u32,
    pub deepest_nesting: u32,
    pub declaration_bytes: u64,
    pub element_items: u64,
    /// Instances it expands to, at most ([`MAX_INSTANCES`]).
    pub instances: u64,
}

impl CodeShape {
    /// The shape of `bytes` (a component or core module). An unparsable
    /// part ends the scan: the compiler reports it.
    pub fn of(bytes: &[u8]) -> CodeShape {
        let mut shape = CodeShape::default();
        let mut instances = Expansion::default();
        for payload in Parser::new(0).parse_all(bytes) {
            if let Ok(payload) = &payload {
                instances.note(payload);
            }
            match payload {
                Ok(Payload::CodeSectionStart { count, .. }) => {
                    shape.functions = shape.functions.saturating_add(count);
                }
                Ok(Payload::CodeSectionEntry(body)) => {
                    let size = body.range().len() as u32;
                    shape.code_bytes += u64::from(size);
                    shape.largest_function = shape.largest_function.max(size);
                    let depth = nesting(&body);
                    shape.deepest_nesting = shape.deepest_nesting.max(depth);
                }
                Ok(payload) => {
                    if let Payload::ElementSection(section) = &payload {
                        let items = element_items(section.clone());
                        shape.element_items = shape.element_items.saturating_add(items);
                    }
                    let bytes = declaration_bytes(&payload) as u64;
                    shape.declaration_bytes = shape.declaration_bytes.saturating_add(bytes);
                }
                Err(_) => break,
            }
        }
        shape.instances = instances.largest;
        shape
    }

    /// Why the code is too costly to compile, if it is.
    pub fn refusal(&self) -> Option<String> {
        if self.functions > MAX_FUNCTIONS {
            return Some(format!(
                "{} functions, more than {MAX_FUNCTIONS} (compiling them would take gigabytes)",
                self.functions
            ));
        }
        if self.code_bytes > MAX_CODE_BYTES {
            return Some(format!(
                "{} bytes of code, more than {MAX_CODE_BYTES}",
                self.code_bytes
            ));
        }
        if self.largest_function > MAX_FUNCTION_BYTES {
            return Some(format!(
                "a function of {} bytes, more than {MAX_FUNCTION_BYTES}",
                self.largest_function
            ));
        }
        if self.deepest_nesting > MAX_NESTING {
            return Some(format!(
                "blocks nested more than {MAX_NESTING} deep in one function"
            ));
        }
        if self.element_items > MAX_ELEMENT_ITEMS {
            return Some(format!(
                "{} element segment items, more than {MAX_ELEMENT_ITEMS}",
                self.element_items
            ));
        }
        if self.instances > MAX_INSTANCES {
            return Some(format!(
                "nested components that expand to more than {MAX_INSTANCES} instances ({}): each instantiation is compiled inline",
                self.instances
            ));
        }
        if self.declaration_bytes > MAX_DECLARATION_BYTES {
            return Some(format!(
                "{} bytes of type and linking declarations, more than {MAX_DECLARATION_BYTES}",
                self.declaration_bytes
            ));
        }
        None
    }
}

/// What the components seen so far expand to ([`MAX_INSTANCES`]).
#[derive(Default)]
struct Expansion {
    /// The module or component being read, and those around it.
    scopes: Vec<Scope>,
    /// The most instances any component read to its end expands to.
    largest: u64,
}

#[derive(Default)]
struct Scope {
    component: bool,
    /// Core instances and component instantiations it declares itself.
    core: u64,
    instantiations: u64,
}

impl Expansion {
    fn note(&mut self, payload: &Payload) {
        match payload {
            Payload::Version { encoding, .. } => self.scopes.push(Scope {
                component: *encoding == wasmparser::Encoding::Component,
                ..Scope::default()
            }),
            Payload::InstanceSection(s) => self.add(|scope| scope.core += u64::from(s.count())),
            Payload::ComponentInstanceSection(s) => {
                self.add(|scope| scope.instantiations += u64::from(s.count()))
            }
            Payload::End(_) => {
                if let Some(done) = self.scopes.pop().filter(|s| s.component) {
                    let inlined = done.instantiations.saturating_mul(self.largest.max(1));
                    let expands = 1u64.saturating_add(done.core).saturating_add(inlined);
                    self.largest = self.largest.max(expands);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, count: impl FnOnce(&mut Scope)) {
        if let Some(scope) = self.scopes.last_mut() {
            count(scope);
        }
    }
}

/// The items of every segment of an element section (as declared: an
/// unreadable segment ends the count; the compiler reports it).
fn element_items(section: wasmparser::ElementSectionReader) -> u64 {
    let mut items = 0u64;
    for element in section.into_iter() {
        let Ok(element) = element else { break };
        let count = match element.items {
            wasmparser::ElementItems::Functions(r) => r.count(),
            wasmparser::ElementItems::Expressions(_, r) => r.count(),
        };
        items = items.saturating_add(u64::from(count));
    }
    items
}

/// The bytes of `payload` if it is a section of type or linking
/// declarations, globals, tables or element segments
/// ([`MAX_DECLARATION_BYTES`]), else 0.
fn declaration_bytes(payload: &Payload) -> usize {
    match payload {
        Payload::TypeSection(s) => s.range().len(),
        Payload::ElementSection(s) => s.range().len(),
        Payload::GlobalSection(s) => s.range().len(),
        Payload::TableSection(s) => s.range().len(),
        Payload::ImportSection(s) => s.range().len(),
        Payload::ExportSection(s) => s.range().len(),
        Payload::InstanceSection(s) => s.range().len(),
        Payload::CoreTypeSection(s) => s.range().len(),
        Payload::ComponentInstanceSection(s) => s.range().len(),
        Payload::ComponentAliasSection(s) => s.range().len(),
        Payload::ComponentTypeSection(s) => s.range().len(),
        Payload::ComponentCanonicalSection(s) => s.range().len(),
        Payload::ComponentImportSection(s) => s.range().len(),
        Payload::ComponentExportSection(s) => s.range().len(),
        _ => 0,
    }
}

/// The deepest block nesting in `body`, counted up to just past the bound.
fn nesting(body: &wasmparser::FunctionBody) -> u32 {
    let Ok(mut ops) = body.get_operators_reader() else {
        return 0;
    };
    let (mut depth, mut deepest) = (0u32, 0u32);
    while !ops.eof() {
        match ops.read() {
            Ok(Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. })
            | Ok(Operator::TryTable { .. }) => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > MAX_NESTING {
                    return deepest;
                }
            }
            Ok(Operator::End) => depth = depth.saturating_sub(1),
            Ok(_) => {}
            Err(_) => return deepest,
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(funcs: usize, body: &str) -> Vec<u8> {
        let f = format!("(func {body})");
        wat::parse_str(format!("(module {})", f.repeat(funcs))).unwrap()
    }

    #[test]
    fn element_items_are_bounded() {
        let items = |n: usize| {
            let refs = "0 ".repeat(n);
            let wat = format!("(module (table 1 funcref) (func) (elem (i32.const 0) func {refs}))");
            CodeShape::of(&wat::parse_str(wat).unwrap())
        };
        let fits = items(MAX_ELEMENT_ITEMS as usize);
        assert_eq!(fits.element_items, MAX_ELEMENT_ITEMS);
        assert_eq!(fits.refusal(), None);
        let over = items(MAX_ELEMENT_ITEMS as usize + 1).refusal().unwrap();
        assert!(over.contains("16385 element segment items"), "{over}");
    }

    /// Components nested 30 deep, each instantiating the one below twice,
    /// are refused from their 1.5 KB; nested once, instantiated a few
    /// times, they are not.
    #[test]
    fn nested_instantiations_are_bounded() {
        let nested = |depth: usize, fan: usize| {
            let mut c = "(core module $m) (core instance (instantiate $m))".to_string();
            for _ in 0..depth {
                let fan = "(instance (instantiate $c)) ".repeat(fan);
                c = format!("(component $c {c}) {fan}");
            }
            CodeShape::of(&wat::parse_str(format!("(component {c})")).unwrap())
        };
        let bomb = nested(30, 2);
        let why = bomb.refusal().unwrap();
        assert!(why.contains("more than 10000 instances"), "{why}");
        let composed = nested(2, 3);
        assert!(composed.instances < 30, "{composed:?}");
        assert_eq!(composed.refusal(), None);
    }

    #[test]
    fn counts_functions_bodies_and_nesting() {
        let shape = CodeShape::of(&module(3, "(block (loop (nop)))"));
        assert_eq!(shape.functions, 3);
        assert_eq!(shape.deepest_nesting, 2);
        assert_eq!(shape.refusal(), None);
    }

    /// Every plugin the project builds, the Python and JavaScript samples
    /// (an interpreter each) included, is well within the bounds.
    #[test]
    fn the_projects_plugins_are_within_the_bounds() {
        let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist");
        for p in [
            "plugins/workspace.wasm",
            "samples/py-csv.wasm",
            "samples/js-json.wasm",
        ] {
            let bytes = std::fs::read(dist.join(p)).unwrap();
            let shape = CodeShape::of(&bytes);
            eprintln!("{p}: {shape:?}");
            assert_eq!(shape.refusal(), None, "{p}: {shape:?}");
            assert!(shape.functions < MAX_FUNCTIONS / 4, "{p}: {shape:?}");
            assert!(shape.instances < MAX_INSTANCES / 100, "{p}: {shape:?}");
        }
    }

    #[test]
    fn bombs_are_refused_by_their_shape() {
        let many = module(MAX_FUNCTIONS as usize + 1, "");
        assert!(CodeShape::of(&many)
            .refusal()
            .unwrap()
            .contains("functions"));
        let deep = format!("{}{}", "(block ".repeat(10_001), ")".repeat(10_001));
        let shape = CodeShape::of(&module(1, &deep));
        assert!(shape.refusal().unwrap().contains("nested"), "{shape:?}");
    }
}
