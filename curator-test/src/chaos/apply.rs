//! Doing one planned fault, and undoing everything at the end of a run.

use std::time::{Duration, Instant};

use tokio::time::sleep;

use super::fault::Fault;
use super::plan::Planned;
use super::target::{Ensemble, Target};
use crate::{eventually, expire_session, ChaosProxy, TestingError, Timing};

/// What a fault turned out to be aimed at, beyond its plan.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The member acted on (for a leader kill, the leader at the time).
    pub(crate) member: Option<usize>,
    /// For an expiry: the instant just before the session was closed.
    pub(crate) expired_at: Option<Instant>,
}

/// Does faults to targets and an ensemble. A fault that cannot be done is an `Err` with the
/// reason, to be counted as skipped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Applier<'a> {
    pub(crate) targets: &'a [Target],
    pub(crate) ensemble: Option<&'a Ensemble>,
    pub(crate) session_timeout: Duration,
}

fn text(e: TestingError) -> String {
    e.to_string()
}

impl Applier<'_> {
    fn target(&self, planned: &Planned) -> Result<&Target, String> {
        planned.target.and_then(|i| self.targets.get(i)).ok_or_else(|| "no such target".to_string())
    }

    fn ensemble(&self) -> Result<&Ensemble, String> {
        self.ensemble.ok_or_else(|| "no ensemble was given".to_string())
    }

    /// Does `planned` and undoes it again (for faults that last).
    pub(crate) async fn apply(&self, planned: &Planned) -> Result<Applied, String> {
        let member = planned.member;
        match planned.fault {
            Fault::Expire => return self.expire(self.target(planned)?).await,
            Fault::Cut => self.target(planned)?.proxy().cut(),
            Fault::Pause(d) => {
                let proxy = self.target(planned)?.proxy();
                proxy.pause();
                sleep(d).await;
                proxy.pass();
            }
            Fault::PauseRequests(d) => {
                let proxy = self.target(planned)?.proxy();
                proxy.pause_requests();
                sleep(d).await;
                proxy.pass();
            }
            Fault::PauseReplies(d) => {
                let proxy = self.target(planned)?.proxy();
                proxy.pause_replies();
                sleep(d).await;
                proxy.pass();
            }
            Fault::Reject(d) => {
                let proxy = self.target(planned)?.proxy();
                proxy.set_reject(true);
                proxy.cut();
                sleep(d).await;
                proxy.set_reject(false);
            }
            Fault::Latency(latency, d) => {
                let proxy = self.target(planned)?.proxy();
                proxy.set_latency(latency);
                sleep(d).await;
                proxy.set_latency(Duration::ZERO);
            }
            Fault::SwallowReply => self.swallow(self.target(planned)?.proxy()).await?,
            Fault::ServerPause(d) => match self.ensemble()? {
                Ensemble::Server(s) => {
                    s.lock().await.pause().map_err(text)?;
                    sleep(d).await;
                    s.lock().await.resume().map_err(text)?;
                }
                Ensemble::Cluster(c) => {
                    let m = member.unwrap_or(0);
                    c.lock().await.pause(m).map_err(text)?;
                    sleep(d).await;
                    c.lock().await.resume(m).map_err(text)?;
                }
            },
            Fault::ServerRestart => match self.ensemble()? {
                Ensemble::Server(s) => {
                    let mut s = s.lock().await;
                    s.kill().await.map_err(text)?;
                    s.restart().await.map_err(text)?;
                }
                Ensemble::Cluster(c) => c.lock().await.restart(member.unwrap_or(0)).await.map_err(text)?,
            },
            Fault::LeaderKill => return self.leader_kill().await,
        }
        Ok(Applied { member, expired_at: None })
    }

    async fn expire(&self, target: &Target) -> Result<Applied, String> {
        let session = target.session().ok_or_else(|| "the client has no session".to_string())?;
        let connect = match self.ensemble {
            Some(e) => e.connect_string().await,
            None => target.proxy().upstream().to_string(),
        };
        let at = Instant::now();
        expire_session(&connect, &session).await.map_err(text)?;
        Ok(Applied { member: None, expired_at: Some(at) })
    }

    /// Arms the swallow and waits up to half a session timeout for a request to take it.
    async fn swallow(&self, proxy: &ChaosProxy) -> Result<(), String> {
        proxy.swallow_next_reply();
        let window = self.session_timeout / 2;
        let taken = eventually(window, || async { !proxy.swallow_pending() }).await;
        if !taken && proxy.disarm_swallow() {
            return Err(format!("no request came within {window:?}"));
        }
        Ok(())
    }

    async fn leader_kill(&self) -> Result<Applied, String> {
        let Ensemble::Cluster(c) = self.ensemble()? else {
            return Err("a leader kill needs a cluster".to_string());
        };
        let deadline = Timing::new().deadline();
        let mut c = c.lock().await;
        let leader = c.wait_for_leader(deadline).await.map_err(text)?;
        c.kill(leader).await.map_err(text)?;
        let next = c.wait_for_leader(deadline).await;
        let restarted = c.restart(leader).await;
        let next = next.map_err(|e| format!("after killing leader {leader}: {e}"))?;
        restarted.map_err(|e| format!("restarting old leader {leader}: {e}"))?;
        tracing::info!(old = leader, new = next, "chaos: leader killed, another elected, old one back");
        Ok(Applied { member: Some(leader), expired_at: None })
    }

    /// Puts everything back: every proxy passing with no latency and no swallow armed, every
    /// server running and not paused. Returns what could not be put back.
    pub(crate) async fn restore(&self) -> Vec<String> {
        self.restore_proxies();
        let mut errors = Vec::new();
        match self.ensemble {
            None => {}
            Some(Ensemble::Server(s)) => {
                let mut s = s.lock().await;
                let result = if s.is_running() { s.resume() } else { s.restart().await };
                if let Err(e) = result {
                    errors.push(format!("server {}: {e}", s.connect_string()));
                }
            }
            Some(Ensemble::Cluster(c)) => {
                let mut c = c.lock().await;
                for i in 0..c.len() {
                    let result = if c.is_running(i) { c.resume(i) } else { c.restart(i).await };
                    if let Err(e) = result {
                        errors.push(format!("cluster member {i}: {e}"));
                    }
                }
            }
        }
        errors
    }

    /// What [`restore`](Self::restore) can do without waiting: proxies, and SIGCONT to servers
    /// whose lock is free. For a run that is dropped half-way.
    pub(crate) fn restore_now(&self) {
        self.restore_proxies();
        match self.ensemble {
            None => {}
            Some(Ensemble::Server(s)) => {
                if let Ok(s) = s.try_lock() {
                    let _ = s.resume();
                }
            }
            Some(Ensemble::Cluster(c)) => {
                if let Ok(c) = c.try_lock() {
                    for i in (0..c.len()).filter(|&i| c.is_running(i)) {
                        let _ = c.resume(i);
                    }
                }
            }
        }
    }

    fn restore_proxies(&self) {
        for t in self.targets {
            let proxy = t.proxy();
            proxy.pass();
            proxy.set_latency(Duration::ZERO);
            proxy.disarm_swallow();
        }
    }
}
