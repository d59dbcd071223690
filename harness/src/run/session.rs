//! A task's tool session: its MCP connections, catalog and (forked) pipeline.
//!
//! Changes coming from servers — `tools/list_changed`, a server that exited —
//! are only acted on in [`ToolSession::safe_point`], which the agent loop calls
//! between rounds: reconnect lost servers, rediscover, then swap the catalog and
//! the pipeline's MCP tools in one step.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::mcp::adapter::{tools_from_catalog, ArtifactStore};
use crate::mcp::connection::{ConnState, ConnectError, Connection, ConnectionHandle, Connector};
use crate::mcp::discovery::{discover, Discovery, DiscoveryError};
use crate::run::policy::Policy;
use crate::run::trace::Trace;
use crate::tools::catalog::{Catalog, CatalogSnapshot};
use crate::tools::naming::NameCollision;
use crate::tools::pipeline::ToolPipeline;
use crate::tools::tool::Tool;

pub const MAX_RECONNECTS: u32 = 3;
const INIT_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The message names the server and the problem once (the problem is
    /// not also a `source`, so an error chain does not repeat it).
    #[error("server `{server}`: {problem}")]
    Discovery {
        server: String,
        problem: DiscoveryError,
    },
    #[error(transparent)]
    Collision(#[from] NameCollision),
    #[error("server `{0}` has no connector")]
    NoConnector(String),
    #[error("server `{0}` lost too often (>{MAX_RECONNECTS} reconnects)")]
    TooManyReconnects(String),
}

struct Slot {
    id: String,
    connector: Arc<dyn Connector>,
    conn: ConnectionHandle,
    reconnects: u32,
}

pub struct ToolSession {
    policy: Policy,
    slots: Vec<Slot>,
    catalog: Catalog,
    pipeline: ToolPipeline,
    artifacts: Arc<ArtifactStore>,
    trace: Arc<Trace>,
}

impl ToolSession {
    /// Connect every policy server (in policy order), discover, build catalog v1.
    pub async fn start(
        policy: Policy,
        mut connectors: HashMap<String, Arc<dyn Connector>>,
        base: &ToolPipeline,
        session_id: &str,
        artifacts: Arc<ArtifactStore>,
        trace: Arc<Trace>,
    ) -> Result<Self, SessionError> {
        let mut slots = Vec::new();
        let mut this_err = None;
        for sp in &policy.servers {
            let Some(connector) = connectors.remove(&sp.id) else {
                this_err = Some(SessionError::NoConnector(sp.id.clone()));
                break;
            };
            match Connection::open(
                &sp.id,
                connector.clone(),
                &sp.protocol_versions,
                INIT_TIMEOUT,
            )
            .await
            {
                Ok(conn) => {
                    trace.record(
                        "server_connected",
                        json!({"server": sp.id, "facts": conn.facts()}),
                    );
                    slots.push(Slot {
                        id: sp.id.clone(),
                        connector,
                        conn,
                        reconnects: 0,
                    });
                }
                Err(e) => {
                    trace.record(
                        "server_connect_failed",
                        json!({"server": sp.id, "error": e.to_string()}),
                    );
                    this_err = Some(e.into());
                    break;
                }
            }
        }
        let mut s = Self {
            policy,
            slots,
            catalog: Catalog::new(CatalogSnapshot::default()),
            pipeline: base.fork(session_id),
            artifacts,
            trace,
        };
        if let Some(e) = this_err {
            s.shutdown().await;
            return Err(e);
        }
        if let Err(e) = s.rebuild(Discovery::First).await {
            s.shutdown().await;
            return Err(e);
        }
        Ok(s)
    }

    async fn discover_all(&self, when: Discovery) -> Result<Vec<Tool>, SessionError> {
        let mut tools = Vec::new();
        for slot in &self.slots {
            let sp = self.policy.server(&slot.id).expect("slot from policy");
            let found = discover(&slot.conn, sp, when).await.map_err(|problem| {
                SessionError::Discovery {
                    server: slot.id.clone(),
                    problem,
                }
            })?;
            for skipped in &found.skipped {
                self.trace.record(
                    "tool_skipped",
                    json!({"server": slot.id, "tool": skipped.name, "reason": skipped.reason}),
                );
            }
            tools.extend(found.tools);
        }
        Ok(tools)
    }

    /// Rediscover all servers and swap catalog + pipeline tools atomically.
    async fn rebuild(&mut self, when: Discovery) -> Result<(), SessionError> {
        // Clear flags first: a change arriving during discovery re-marks dirty.
        for s in &self.slots {
            s.conn.take_list_changed();
        }
        let tools = self.discover_all(when).await?;
        let version = self.catalog.refresh(tools)?;
        let conns: HashMap<String, ConnectionHandle> = self
            .slots
            .iter()
            .map(|s| (s.id.clone(), s.conn.clone()))
            .collect();
        let specs = tools_from_catalog(
            &self.catalog.snapshot(),
            &conns,
            &self.policy,
            &self.artifacts,
        );
        self.pipeline.replace_remote_tools(specs);
        self.trace.record(
            "catalog",
            json!({"catalog_version": version, "tools": self.pipeline.names()}),
        );
        Ok(())
    }

    /// Between rounds: reconnect lost servers, refresh a dirty catalog.
    pub async fn safe_point(&mut self) -> Result<(), SessionError> {
        let mut dirty = false;
        for i in 0..self.slots.len() {
            let state = self.slots[i].conn.state();
            let lost = !self.slots[i].conn.is_alive();
            if lost {
                let id = self.slots[i].id.clone();
                self.trace
                    .record("server_lost", json!({"server": id, "state": state}));
                if self.slots[i].reconnects >= MAX_RECONNECTS {
                    return Err(SessionError::TooManyReconnects(id));
                }
                self.slots[i].conn.close().await;
                let sp = self.policy.server(&id).expect("slot from policy");
                let conn = Connection::open(
                    &id,
                    self.slots[i].connector.clone(),
                    &sp.protocol_versions,
                    INIT_TIMEOUT,
                )
                .await?;
                self.slots[i].reconnects += 1;
                self.trace.record(
                    "server_reconnected",
                    json!({"server": id, "attempt": self.slots[i].reconnects}),
                );
                self.slots[i].conn = conn;
                dirty = true;
            } else if self.slots[i].conn.list_changed_pending() {
                self.trace
                    .record("tools_list_changed", json!({"server": self.slots[i].id}));
                dirty = true;
            }
        }
        if dirty {
            self.rebuild(Discovery::Again).await?;
        }
        Ok(())
    }

    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        self.catalog.snapshot()
    }

    pub fn pipeline(&self) -> &ToolPipeline {
        &self.pipeline
    }

    pub fn connection(&self, server: &str) -> Option<&ConnectionHandle> {
        self.slots.iter().find(|s| s.id == server).map(|s| &s.conn)
    }

    /// Cancel the requests in flight on every connection (interrupt).
    pub fn cancel_in_flight(&self, reason: &str) {
        for s in &self.slots {
            s.conn.cancel_in_flight(reason);
        }
    }

    /// Close connections in reverse order of opening.
    pub async fn shutdown(&mut self) {
        for s in self.slots.iter().rev() {
            s.conn.close().await;
            let state = s.conn.state();
            let state = if state == ConnState::Open {
                ConnState::Closed
            } else {
                state
            };
            self.trace
                .record("server_closed", json!({"server": s.id, "state": state}));
        }
        self.slots.clear();
    }
}
