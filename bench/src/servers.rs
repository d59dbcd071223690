//! The MCP servers under test: how to spawn one, and a connection to it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tokio::process::Command;

/// How to spawn one MCP stdio server.
#[derive(Clone)]
pub struct ServerSpec {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The server's stderr goes here (appended), for post-mortems.
    pub log: PathBuf,
}

/// A client connected to a server the bench spawned.
pub struct Connection {
    client: RunningService<RoleClient, ()>,
    /// The server process itself (not a shell around it).
    pub pid: u32,
}

impl Connection {
    pub fn peer(&self) -> &Peer<RoleClient> {
        self.client.peer()
    }

    /// Ends the session; the server exits.
    pub async fn close(self) -> Result<()> {
        self.client.cancel().await?;
        Ok(())
    }
}

impl ServerSpec {
    pub fn with_args(&self, extra: &[OsString]) -> ServerSpec {
        let mut s = self.clone();
        s.args.extend(extra.iter().cloned());
        s
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).env("WASM_MCP_LOG", "warn");
        cmd
    }

    /// Spawn and initialize.
    pub async fn connect(&self) -> Result<Connection> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let (transport, _) = TokioChildProcess::builder(self.command())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("spawning {}", self.program.display()))?;
        let pid = transport
            .id()
            .with_context(|| format!("{}: no process id", self.name))?;
        let client = ().serve(transport).await.map_err(|e| {
            anyhow!(
                "{}: MCP initialize failed: {e} (see {})",
                self.name,
                self.log.display()
            )
        })?;
        Ok(Connection { client, pid })
    }

    /// Spawn → initialize → first `tools/list` answer, which must list `tool`.
    pub async fn start_once(&self, tool: &str) -> Result<Duration> {
        let t0 = Instant::now();
        let conn = self.connect().await?;
        self.expect_tool(&conn, tool).await?;
        let dt = t0.elapsed();
        conn.close().await?;
        Ok(dt)
    }

    /// `tools/list` on `conn` names `tool`.
    pub async fn expect_tool(&self, conn: &Connection, tool: &str) -> Result<()> {
        let tools = conn
            .peer()
            .list_tools(None)
            .await
            .map_err(|e| anyhow!("{}: tools/list: {e}", self.name))?;
        ensure!(
            tools.tools.iter().any(|t| t.name == tool),
            "{}: tools/list has no {tool}",
            self.name
        );
        Ok(())
    }
}

pub fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}
