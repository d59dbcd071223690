//! Validation with a budget, off the async executor when it could be slow.
//!
//! The price of a validation is known before it runs
//! ([`CheckedSchema::cost`]: expanded subschemas × instance nodes). Three
//! bands:
//! * cost ≤ [`ValidationBudget::inline_cost`]: validated inline. Measured on
//!   the project's 2-core machine, a `spawn_blocking` round trip (plus the
//!   semaphore and timeout) costs ~25–35 µs against ~40 ns for validating
//!   `read_file`'s arguments inline: doing it for every call would add ~15%
//!   to a small call. Below this bound even the worst case (every unit
//!   producing an error) stays around a millisecond.
//! * up to [`ValidationBudget::max_cost`]: on tokio's blocking pool, at most
//!   [`ValidationBudget::threads`] at once within their deadline (a
//!   semaphore; a job past it keeps running outside that count, holding
//!   its lane's permit, below), under a time budget; the caller gets
//!   [`ValidationFailure::BudgetExceeded`] at the deadline while other
//!   requests keep being served.
//! * above `max_cost`: refused without running ([`ValidationFailure::TooCostly`]).
//!
//! A validation first only checks (jsonschema's `is_valid`, which copies
//! nothing), at the schema's price. A value that fails is then explained
//! (its first error, [`crate::validate`]) at the price of explaining, which
//! is higher: a failing `anyOf`/`oneOf` copies the value it failed on once
//! per branch and builds every error of its branches, so there every
//! string counts by its length and every name of a `required` list counts
//! ([`CheckedSchema::cost_of_errors`]).
//! Above [`ValidationBudget::max_explain_cost`] the failure is reported
//! without its errors (490 `anyOf` branches failing on a plugin's own 5 MB
//! string took 1.1 s and 2.4 GB when explained inline; a helper's find).
//!
//! Work on behalf of a plugin (its results, its tools' arguments) runs in
//! that plugin's [`Lane`] (other work in one lane of `threads` permits): a
//! job takes a permit of its lane, then one of the shared threads'
//! (`threads` of them). A job that overruns its budget cannot be
//! interrupted: it keeps its lane's permit until it ends, but gives the
//! shared permit back at its caller's deadline, or when its caller stops
//! waiting (a cancelled call), whichever is first. So jobs running past
//! their deadline are at most a lane's worth per lane, and a plugin
//! whose results are slow to check (each within its price, or not) makes
//! its own later checks wait or fail with `BudgetExceeded`, and others wait
//! at most for jobs still within their budget; nothing blocks the
//! executor. When the threads were one queue, 48 of one plugin's results
//! (~0.14 s each, priced just under the budget) queued another plugin's
//! `list_dir` result check past its budget, and that plugin's call failed; and when
//! overrunning jobs kept their shared permits, two such plugins could
//! hold every thread (a reviewer's find).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::checked_schema::CheckedSchema;

/// Limits of one validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationBudget {
    /// Wall-clock time for each step of a validation (the check, then,
    /// for a value that fails, the explanation), waiting for its lane and
    /// a thread included.
    pub time: Duration,
    /// Highest price accepted (expanded subschemas × instance nodes).
    pub max_cost: u64,
    /// Up to this price, validate inline on the calling task.
    pub inline_cost: u64,
    /// Highest price of listing a failing value's errors (each unit copies
    /// at most ~64 bytes: ~16 MB at the default); above it the failure is
    /// reported without them.
    pub max_explain_cost: u64,
    /// Validations running at once off the executor within their deadline
    /// (a job past it keeps running, holding only its lane's permit).
    pub threads: usize,
}

impl Default for ValidationBudget {
    fn default() -> Self {
        ValidationBudget {
            time: Duration::from_secs(1),
            max_cost: 2_000_000,
            inline_cost: 1_000,
            max_explain_cost: 250_000,
            threads: 2,
        }
    }
}

/// Why a value could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationFailure {
    /// The value does not match: its first error with its JSON pointer, or
    /// why its errors were not listed.
    #[error("{0}")]
    Invalid(String),
    #[error("validation would cost {cost} units (expanded subschemas × value nodes), over the validation budget of {limit}")]
    TooCostly { cost: u64, limit: u64 },
    #[error("validation did not finish within its budget of {0:?}")]
    BudgetExceeded(Duration),
}

/// Runs validations within a [`ValidationBudget`].
pub struct Validation {
    budget: ValidationBudget,
    permits: Arc<Semaphore>,
    /// The lane of work that names none (e.g. the harness's checks):
    /// `threads` permits, so that its jobs past their deadline are bounded
    /// too.
    unlaned: Lane,
}

/// The permit of a shared validation thread, given back by whichever comes
/// first: the end of its job, or its caller's deadline.
#[derive(Clone, Default)]
struct SharedThread(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl SharedThread {
    fn hold(&self, permit: OwnedSemaphorePermit) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(permit);
    }

    fn give_back(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// Gives a [`SharedThread`] back when dropped: by the job when it ends or
/// unwinds, by its caller when it stops waiting (at the deadline, or
/// cancelled).
struct GiveBack(SharedThread);

impl Drop for GiveBack {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

/// One plugin's share of a [`Validation`]'s threads ([`Validation::lane`]):
/// its validations take a permit of their lane before a shared thread.
#[derive(Debug)]
pub struct Lane {
    permits: Arc<Semaphore>,
}

impl Lane {
    /// A lane of `permits` validations at once.
    fn of(permits: usize) -> Lane {
        Lane {
            permits: Arc::new(Semaphore::new(permits)),
        }
    }
}

impl Validation {
    pub fn new(budget: ValidationBudget) -> Self {
        let threads = budget.threads.max(1);
        Validation {
            budget,
            permits: Arc::new(Semaphore::new(threads)),
            unlaned: Lane::of(threads),
        }
    }

    /// The process-wide runner with the default budget.
    pub fn shared() -> &'static Validation {
        static SHARED: OnceLock<Validation> = OnceLock::new();
        SHARED.get_or_init(|| Validation::new(ValidationBudget::default()))
    }

    pub fn budget(&self) -> &ValidationBudget {
        &self.budget
    }

    /// A new lane: half of the threads, rounded up (as a plugin's share of
    /// the call slots is half of them).
    pub fn lane(&self) -> Lane {
        Lane::of(self.budget.threads.max(1).div_ceil(2))
    }

    /// Price `value` against `schema` (counting stops past the budget).
    pub fn cost(&self, schema: &CheckedSchema, value: &Value) -> u64 {
        schema.cost(value, self.budget.max_cost)
    }

    /// Run `job`, whose price is `cost`, within the budget: inline when
    /// cheap, else on a blocking thread with a deadline, in `lane` (or the
    /// lane of work that names none): its permit first, then a shared
    /// thread's. The lane's permit is held until the job ends; the shared
    /// one until the job ends or its caller stops waiting (its deadline, or
    /// cancelled), whichever is first.
    pub async fn run<T: Send + 'static>(
        &self,
        lane: Option<&Lane>,
        cost: u64,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ValidationFailure> {
        if cost > self.budget.max_cost {
            return Err(ValidationFailure::TooCostly {
                cost,
                limit: self.budget.max_cost,
            });
        }
        if cost <= self.budget.inline_cost {
            return Ok(job());
        }
        let lane = lane.unwrap_or(&self.unlaned);
        let (own, shared) = (lane.permits.clone(), self.permits.clone());
        let thread = SharedThread::default();
        let on_thread = thread.clone();
        // Dropped when the caller stops waiting, however that happens.
        let _give_back = GiveBack(thread);
        let off_thread = async move {
            let own = own.acquire_owned().await.expect("never closed");
            on_thread.hold(shared.acquire_owned().await.expect("never closed"));
            let given_back = GiveBack(on_thread);
            tokio::task::spawn_blocking(move || {
                let _permits = (own, given_back);
                job()
            })
            .await
        };
        match tokio::time::timeout(self.budget.time, off_thread).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(join)) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            // A blocking task cancelled (the runtime shutting down) did not finish.
            Ok(Err(_)) | Err(_) => Err(ValidationFailure::BudgetExceeded(self.budget.time)),
        }
    }

    /// Validate `value` (returned when valid), in `lane` if any: checked
    /// at the schema's price, and explained only when it fails, at the
    /// price of explaining.
    pub async fn validate(
        &self,
        lane: Option<&Lane>,
        schema: &Arc<CheckedSchema>,
        value: Value,
    ) -> Result<Value, ValidationFailure> {
        let cost = self.cost(schema, &value);
        let checked = schema.clone();
        let (valid, value) = self
            .run(lane, cost, move || (checked.is_valid(&value), value))
            .await?;
        if valid {
            return Ok(value);
        }
        Err(ValidationFailure::Invalid(
            self.explain(lane, schema, value).await,
        ))
    }

    /// Why `value`, which `schema` refuses, is refused: its errors, or,
    /// when listing them is over [`ValidationBudget::max_explain_cost`] or
    /// its time, a message saying so.
    async fn explain(
        &self,
        lane: Option<&Lane>,
        schema: &Arc<CheckedSchema>,
        value: Value,
    ) -> String {
        let cap = self.budget.max_explain_cost;
        let cost = schema.cost_of_errors(&value, cap);
        if cost > cap {
            return format!("the value does not match; its errors were not listed (listing them would cost {cost} units, over the {cap} allowed)");
        }
        let schema = schema.clone();
        match self
            .run(lane, cost, move || crate::validate(&schema, &value).err())
            .await
        {
            Ok(Some(errors)) => errors,
            Ok(None) => "the value does not match".into(),
            Err(e) => format!("the value does not match; its errors were not listed: {e}"),
        }
    }

    /// [`crate::check_result`] with the output schema's validation bounded
    /// (in `lane`, if any). The error is the contract violation to report.
    pub async fn check_result(
        &self,
        lane: Option<&Lane>,
        text: &str,
        output: Option<&Arc<CheckedSchema>>,
    ) -> Result<Value, String> {
        let value = crate::check_result(text, None)?;
        match output {
            None => Ok(value),
            Some(schema) => self
                .validate(lane, schema, value)
                .await
                .map_err(|e| match e {
                    ValidationFailure::Invalid(m) => {
                        format!("result does not match the tool's outputSchema: {m}")
                    }
                    other => {
                        format!(
                            "result could not be checked against the tool's outputSchema: {other}"
                        )
                    }
                }),
        }
    }
}

#[cfg(test)]
mod tests;
