//! Who made each 2025-11-25 session: a session is used only by the
//! principal whose credentials made it (the spec's SHOULD: session ids
//! bound to who the user is). A request of another principal naming it is
//! answered as for a session that does not exist, before it runs or
//! reserves anything in the session (a request id, a GET stream, its end).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::auth::Principal;

/// Session id → the principal that made it.
#[derive(Default)]
pub struct SessionOwners(Mutex<HashMap<String, Principal>>);

impl SessionOwners {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Principal>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `principal` may use `session`. A session with no owner on
    /// record is left to the session manager (which refuses one it does
    /// not know).
    pub fn admits(&self, session: &str, principal: &Principal) -> bool {
        self.lock()
            .get(session)
            .is_none_or(|owner| owner == principal)
    }

    /// Records that `principal` made `session`; forgets the owners of
    /// sessions that have ended once there are more owners on record than
    /// sessions may be open (`max_sessions`), so the record stays bounded
    /// by sessions, not by how many were ever made.
    pub async fn record(
        &self,
        session: String,
        principal: Principal,
        sessions: &LocalSessionManager,
        max_sessions: usize,
    ) {
        let recorded = {
            let mut owners = self.lock();
            owners.insert(session, principal);
            owners.len()
        };
        if recorded > max_sessions {
            let open = sessions.sessions.read().await;
            self.lock().retain(|id, _| open.contains_key(id.as_str()));
        }
    }

    /// Forgets `session` (ended by its owner).
    pub fn forget(&self, session: &str) {
        self.lock().remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_admits_its_owner_alone_and_the_record_stays_bounded() {
        let owners = SessionOwners::default();
        let sessions = LocalSessionManager::default();
        let (alice, mallory) = (Principal::Subject([1; 32]), Principal::Subject([2; 32]));
        owners
            .record("s1".into(), alice.clone(), &sessions, 4)
            .await;
        assert!(owners.admits("s1", &alice));
        assert!(!owners.admits("s1", &mallory));
        assert!(!owners.admits("s1", &Principal::Operator));
        assert!(
            owners.admits("unknown", &mallory),
            "left to the session manager"
        );
        // None of these sessions is open in the manager: past the bound,
        // the ended ones are forgotten.
        for i in 2..=5 {
            owners
                .record(format!("s{i}"), alice.clone(), &sessions, 4)
                .await;
        }
        assert!(owners.lock().len() <= 4, "{}", owners.lock().len());
        owners
            .record("s9".into(), mallory.clone(), &sessions, 4)
            .await;
        owners.forget("s9");
        assert!(owners.admits("s9", &alice));
    }
}
