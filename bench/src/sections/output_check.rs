//! The output check on the call path: a `read_file` result checked against
//! the tool's output schema as the server checks it
//! (`Validation::shared()`: the validation is priced first, and a result
//! whose price is over the inline band, such as one carrying a long
//! string, is validated on the blocking pool so that it never holds the
//! executor), and the same check with every validation inline (the bound
//! off). Their difference is what that bound costs a call; both parse the
//! guest's JSON text, as the server does.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, ensure, Context, Result};
use wasm_mcp_host::cache::ComponentCache;
use wasm_mcp_host::plugin::Plugin;
use wasm_mcp_host::sandbox::{EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;
use wasm_mcp_protocol::{
    CheckedSchema, Lane, SchemaLimits, SchemaUse, Validation, ValidationBudget,
};

use crate::fixture::FileCase;
use crate::setup::Bench;
use crate::stats::{ratio, us, Stats};

pub async fn run(b: &Bench) -> Result<()> {
    eprintln!("bench: the output check ...");
    let sandbox = Sandbox::new(
        Some(&b.worktree),
        FsAccess::ReadOnly,
        Limits::default(),
        &EngineOptions::default(),
    )?;
    let cache = ComponentCache::new(Some(b.tmp.path().join("cache-output-check")));
    let plugin = Plugin::load(&sandbox, &cache, &b.plugin_path).await?;
    let schema = read_file_output_schema(&plugin)?;
    let inline = Validation::new(ValidationBudget {
        inline_cost: u64::MAX,
        ..ValidationBudget::default()
    });
    println!("== the output check of a read_file result (parse + outputSchema), in process ==");
    println!(
        "{:<52} {:>10} {:>10} {:>12}",
        "measurement", "p50 µs", "p99 µs", "per second"
    );
    for (case, iters) in [(&b.small, b.counts.small), (&b.large, b.counts.large)] {
        let text = result_text(&plugin, &sandbox, case).await?;
        let price = Validation::shared().cost(&schema, &serde_json::from_str(&text)?);
        let served = time_checks(Validation::shared(), &text, &schema, iters).await?;
        let all_inline = time_checks(&inline, &text, &schema, iters).await?;
        for (how, s) in [("as served", &served), ("all inline", &all_inline)] {
            println!(
                "{:<52} {:>10.1} {:>10.1} {:>12.0}",
                format!("{}, {how}", case.label),
                us(s.p50),
                us(s.p99),
                s.rate
            );
        }
        let band = if price <= Validation::shared().budget().inline_cost {
            "inline"
        } else {
            "on the blocking pool"
        };
        println!(
            "  price {price} ({band} as served): as served / all inline p50 {}",
            ratio(us(served.p50), us(all_inline.p50))
        );
    }
    println!();
    Ok(())
}

/// The workspace plugin's `read_file` output schema, compiled as the
/// catalog compiles it.
fn read_file_output_schema(plugin: &Plugin) -> Result<Arc<CheckedSchema>> {
    let raw = plugin
        .tools
        .iter()
        .find(|t| t.name == "read_file")
        .context("the plugin has no read_file tool")?;
    let text = raw
        .output_schema
        .as_deref()
        .context("read_file declares no output schema")?;
    let schema = serde_json::from_str(text)?;
    let checked = CheckedSchema::compile(&schema, &SchemaLimits::default(), SchemaUse::Results)?;
    Ok(Arc::new(checked))
}

/// The guest's JSON text for a `read_file` of `case` (checked whole).
async fn result_text(plugin: &Plugin, sandbox: &Sandbox, case: &FileCase) -> Result<String> {
    let args = serde_json::json!({ "path": case.rel }).to_string();
    let text = plugin
        .call(sandbox, "read_file", &args)
        .await
        .map_err(|e| anyhow!("call: {e}"))?;
    crate::request::check_structured(case, &serde_json::from_str(&text)?)?;
    Ok(text)
}

/// `iters` checks of `text` by `validation`, after a tenth as many to warm
/// up, in a lane of their own (as the server checks a plugin's results).
async fn time_checks(
    validation: &Validation,
    text: &str,
    schema: &Arc<CheckedSchema>,
    iters: usize,
) -> Result<Stats> {
    let lane = validation.lane();
    let check = |text| check(validation, &lane, text, schema);
    for _ in 0..(iters / 10).max(2) {
        check(text).await?;
    }
    let mut samples = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        check(text).await?;
        samples.push(t.elapsed());
    }
    Ok(Stats::new(samples, wall.elapsed()))
}

async fn check(
    validation: &Validation,
    lane: &Lane,
    text: &str,
    schema: &Arc<CheckedSchema>,
) -> Result<()> {
    let value = validation
        .check_result(Some(lane), text, Some(schema))
        .await
        .map_err(|e| anyhow!("the result was refused: {e}"))?;
    ensure!(value.get("content").is_some(), "no content in {value}");
    Ok(())
}
