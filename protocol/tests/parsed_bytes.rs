//! `parsed_bytes` against the heap serde_json really takes: never below its
//! peak for the shapes a hostile result can take, and not so far above it
//! for ordinary results that an honest tool is refused.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use serde_json::Value;
use wasm_mcp_protocol::parsed_bytes;

/// The system allocator, keeping the bytes live and their peak. Each
/// allocation is counted as the chunk glibc makes of it (16-byte steps,
/// 32 at least), as the process's memory sees it.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn chunk(size: usize) -> usize {
    (size + 8).div_ceil(16).max(2) * 16
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(chunk(layout.size()), Relaxed) + chunk(layout.size());
        PEAK.fetch_max(live, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(chunk(layout.size()), Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The heap serde_json's parse of `text` takes at its peak, above what
/// was live before it.
fn peak_of_parse(text: &str) -> usize {
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let v: Value = serde_json::from_str(text).expect("the shape is JSON");
    let peak = PEAK.load(Relaxed) - before;
    drop(v);
    peak
}

fn repeated(head: &str, item: &str, n: usize, tail: &str) -> String {
    let mut s = String::from(head);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(item);
    }
    s.push_str(tail);
    s
}

/// What hostile results are made of: the most containers, slots and
/// allocations per byte. The bound must hold for each (one test, so the
/// counting allocator sees one parse at a time).
#[test]
fn the_bound_holds_for_hostile_shapes_and_is_near_for_ordinary_ones() {
    let members: Vec<String> = (0..50_000).map(|i| format!("\"k{i}\":{i}")).collect();
    let hostile = [
        repeated("{\"a\":[", "{\"\":0}", 100_000, "]}"),
        repeated("{\"a\":[", "{\"a\":0,\"b\":0}", 50_000, "]}"),
        repeated("{\"a\":[", "[0]", 100_000, "]}"),
        repeated("{\"a\":[", "{}", 100_000, "]}"),
        repeated("{\"a\":[", "[]", 100_000, "]}"),
        repeated("{\"a\":[", "\"x\"", 100_000, "]}"),
        repeated("{\"a\":[", "\"\"", 100_000, "]}"),
        repeated("{\"a\":[", "[[[0]]]", 50_000, "]}"),
        format!("{}0{}", "[".repeat(120), "]".repeat(120)),
        format!("{}0{}", "{\"a\":".repeat(120), "}".repeat(120)),
        format!("{{{}}}", members.join(",")),
    ];
    for text in &hostile {
        let (peak, bound) = (peak_of_parse(text), parsed_bytes(text.as_bytes()));
        assert!(
            bound >= peak,
            "{}: bound {bound} < peak {peak}",
            &text[..20]
        );
        eprintln!("{:>24} peak {peak:>10} bound {bound:>10}", &text[..20]);
    }
    let line = r#"{"path":"src/module/file.rs","line":1234,"text":"    let value = compute(&input)?; // a line of code"}"#;
    let ordinary = [
        repeated("{\"n\":[", "1234567", 200_000, "]}"),
        repeated("{\"matches\":[", line, 20_000, "]}"),
        repeated("[", r#"{"id":1,"name":"x"}"#, 100_000, "]"),
        format!(
            "{{\"content\":{}}}",
            serde_json::to_string(&"line of a file\n".repeat(100_000)).unwrap()
        ),
    ];
    for text in &ordinary {
        let (peak, bound) = (peak_of_parse(text), parsed_bytes(text.as_bytes()));
        eprintln!("{:>24} peak {peak:>10} bound {bound:>10}", &text[..20]);
        assert!(
            bound >= peak,
            "{}: bound {bound} < peak {peak}",
            &text[..20]
        );
        assert!(
            bound <= 4 * peak,
            "{}: bound {bound} > 4 × peak {peak}",
            &text[..20]
        );
    }
}
