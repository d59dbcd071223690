//! JSONL trace of a task run: one JSON object per line,
//! `{"seq": n, "t_ms": ms-since-start, "kind": "...", ...data}`.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::{json, Map, Value};

/// Sees every event as it is recorded (human progress output).
pub type TraceObserver = Arc<dyn Fn(&Value) + Send + Sync>;

pub struct Trace {
    start: Instant,
    events: Mutex<Vec<Value>>,
    observer: OnceLock<TraceObserver>,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("events", &self.events)
            .finish()
    }
}

impl Default for Trace {
    fn default() -> Self {
        Self::new()
    }
}

impl Trace {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
            observer: OnceLock::new(),
        }
    }

    /// Set the observer (once); it is called after each event is recorded.
    pub fn observe(&self, observer: TraceObserver) {
        let _ = self.observer.set(observer);
    }

    /// Record an event; `data` fields (if an object) are merged into the line.
    pub fn record(&self, kind: &str, data: Value) {
        let mut ev = self.events.lock().unwrap();
        let mut obj = Map::new();
        obj.insert("seq".into(), json!(ev.len()));
        obj.insert(
            "t_ms".into(),
            json!(self.start.elapsed().as_millis() as u64),
        );
        obj.insert("kind".into(), json!(kind));
        match data {
            Value::Object(m) => obj.extend(m),
            Value::Null => {}
            other => {
                obj.insert("data".into(), other);
            }
        }
        tracing::debug!(kind, "trace");
        let event = Value::Object(obj);
        ev.push(event.clone());
        drop(ev);
        if let Some(o) = self.observer.get() {
            o(&event);
        }
    }

    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    pub fn to_jsonl(&self) -> String {
        let mut s = String::new();
        for e in self.events.lock().unwrap().iter() {
            s.push_str(&e.to_string());
            s.push('\n');
        }
        s
    }

    pub fn write_jsonl(&self, path: &Path) -> std::io::Result<()> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let mut f = std::fs::File::create(path)?;
        f.write_all(self.to_jsonl().as_bytes())?;
        f.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_roundtrip() {
        let t = Trace::new();
        t.record("a", json!({"x": 1}));
        t.record("b", Value::Null);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/trace.jsonl");
        t.write_jsonl(&p).unwrap();
        let lines: Vec<Value> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["kind"], "a");
        assert_eq!(lines[0]["x"], 1);
        assert_eq!(lines[1]["seq"], 1);
        assert_eq!(t.of_kind("b").len(), 1);
    }
}
