//! [`Fault`]: one thing the [`Injector`](super::Injector) does, and [`FaultKind`], its kind.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::TestingError;

/// A kind of fault, without its parameters: what an [`Injector`](super::Injector) is allowed
/// to do, and the key faults are counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// [`Fault::Expire`].
    Expire,
    /// [`Fault::Cut`].
    Cut,
    /// [`Fault::Pause`].
    Pause,
    /// [`Fault::PauseRequests`].
    PauseRequests,
    /// [`Fault::PauseReplies`].
    PauseReplies,
    /// [`Fault::Reject`].
    Reject,
    /// [`Fault::Latency`].
    Latency,
    /// [`Fault::SwallowReply`].
    SwallowReply,
    /// [`Fault::ServerPause`].
    ServerPause,
    /// [`Fault::ServerRestart`].
    ServerRestart,
    /// [`Fault::LeaderKill`].
    LeaderKill,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 11] = [
        FaultKind::Expire,
        FaultKind::Cut,
        FaultKind::Pause,
        FaultKind::PauseRequests,
        FaultKind::PauseReplies,
        FaultKind::Reject,
        FaultKind::Latency,
        FaultKind::SwallowReply,
        FaultKind::ServerPause,
        FaultKind::ServerRestart,
        FaultKind::LeaderKill,
    ];

    /// The short name used in counts, logs and [`FromStr`]: `expire`, `cut`, `pause`,
    /// `pause_requests`, `pause_replies`, `reject`, `latency`, `swallow_reply`,
    /// `server_pause`, `server_restart`, `leader_kill`.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Expire => "expire",
            FaultKind::Cut => "cut",
            FaultKind::Pause => "pause",
            FaultKind::PauseRequests => "pause_requests",
            FaultKind::PauseReplies => "pause_replies",
            FaultKind::Reject => "reject",
            FaultKind::Latency => "latency",
            FaultKind::SwallowReply => "swallow_reply",
            FaultKind::ServerPause => "server_pause",
            FaultKind::ServerRestart => "server_restart",
            FaultKind::LeaderKill => "leader_kill",
        }
    }

    /// Whether faults of this kind act on one client's connection or session (and so need a
    /// [`Target`](super::Target)), rather than on the servers.
    pub fn needs_target(self) -> bool {
        !matches!(self, FaultKind::ServerPause | FaultKind::ServerRestart | FaultKind::LeaderKill)
    }

    /// Whether faults of this kind keep a client's requests from the server for a while, so
    /// that one longer than the session timeout expires the session on the server: `Pause`,
    /// `PauseRequests` and `Reject`. These are the faults an injector may make long and aim at
    /// a client that holds something.
    pub fn is_partition(self) -> bool {
        matches!(self, FaultKind::Pause | FaultKind::PauseRequests | FaultKind::Reject)
    }

    /// Parses a comma-separated list of names (as in an environment variable: `cut,expire`).
    /// Blank entries are ignored.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] naming the first unknown entry.
    pub fn parse_list(list: &str) -> Result<Vec<FaultKind>, TestingError> {
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse).collect()
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = TestingError;

    fn from_str(s: &str) -> Result<FaultKind, TestingError> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| TestingError::InvalidArgument(format!("unknown fault kind {s:?}")))
    }
}

/// One fault, with its parameters. The first eight act on one [`Target`](super::Target)
/// (its proxy or its session), the last three on the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// [`expire_session`](crate::expire_session) of the target's current session.
    Expire,
    /// [`ChaosProxy::cut`](crate::ChaosProxy::cut): the target's connection drops and it
    /// reconnects.
    Cut,
    /// [`ChaosProxy::pause`](crate::ChaosProxy::pause) for this long, then `pass`.
    Pause(Duration),
    /// [`ChaosProxy::pause_requests`](crate::ChaosProxy::pause_requests) for this long, then
    /// `pass`.
    PauseRequests(Duration),
    /// [`ChaosProxy::pause_replies`](crate::ChaosProxy::pause_replies) for this long, then
    /// `pass`.
    PauseReplies(Duration),
    /// `cut` and [`set_reject(true)`](crate::ChaosProxy::set_reject) for this long: the target
    /// cannot reach the server at all.
    Reject(Duration),
    /// [`ChaosProxy::set_latency`](crate::ChaosProxy::set_latency) of the first duration, for
    /// the second.
    Latency(Duration, Duration),
    /// [`ChaosProxy::swallow_next_reply`](crate::ChaosProxy::swallow_next_reply), disarmed
    /// again if no request came within a while.
    SwallowReply,
    /// SIGSTOP the single server or one cluster member for this long, then SIGCONT.
    ServerPause(Duration),
    /// SIGKILL the single server or one cluster member, then start it again with its data.
    ServerRestart,
    /// Cluster only: kill the leader, wait for another to lead, restart the old one.
    LeaderKill,
}

impl Fault {
    /// This fault's kind.
    pub fn fault_kind(&self) -> FaultKind {
        match self {
            Fault::Expire => FaultKind::Expire,
            Fault::Cut => FaultKind::Cut,
            Fault::Pause(_) => FaultKind::Pause,
            Fault::PauseRequests(_) => FaultKind::PauseRequests,
            Fault::PauseReplies(_) => FaultKind::PauseReplies,
            Fault::Reject(_) => FaultKind::Reject,
            Fault::Latency(..) => FaultKind::Latency,
            Fault::SwallowReply => FaultKind::SwallowReply,
            Fault::ServerPause(_) => FaultKind::ServerPause,
            Fault::ServerRestart => FaultKind::ServerRestart,
            Fault::LeaderKill => FaultKind::LeaderKill,
        }
    }

    /// The short name of this fault's kind ([`FaultKind::name`]), the key of counts.
    pub fn kind(&self) -> &'static str {
        self.fault_kind().name()
    }

    /// How long the fault lasts, for those that last.
    pub fn duration(&self) -> Option<Duration> {
        match *self {
            Fault::Pause(d)
            | Fault::PauseRequests(d)
            | Fault::PauseReplies(d)
            | Fault::Reject(d)
            | Fault::Latency(_, d)
            | Fault::ServerPause(d) => Some(d),
            Fault::Expire | Fault::Cut | Fault::SwallowReply | Fault::ServerRestart | Fault::LeaderKill => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::Latency(latency, d) => write!(f, "latency {latency:?} for {d:?}"),
            other => match other.duration() {
                Some(d) => write!(f, "{} {d:?}", other.kind()),
                None => f.write_str(other.kind()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_display() {
        for kind in FaultKind::ALL {
            assert_eq!(kind.name().parse::<FaultKind>().unwrap(), kind);
        }
        assert_eq!(FaultKind::parse_list(" cut, expire ,,").unwrap(), [FaultKind::Cut, FaultKind::Expire]);
        assert!(FaultKind::parse_list("cut,nope").is_err());
        let ms = Duration::from_millis;
        assert_eq!(Fault::Pause(ms(1500)).to_string(), "pause 1.5s");
        assert_eq!(Fault::Latency(ms(20), ms(900)).to_string(), "latency 20ms for 900ms");
        assert_eq!(Fault::LeaderKill.to_string(), "leader_kill");
        assert_eq!(Fault::PauseReplies(ms(5)).kind(), "pause_replies");
        assert!(!FaultKind::ServerPause.needs_target() && FaultKind::SwallowReply.needs_target());
    }
}
