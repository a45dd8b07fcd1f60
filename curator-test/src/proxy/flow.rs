//! Which way bytes may flow through a [`ChaosProxy`](super::ChaosProxy): a small state machine
//! that `pause`, `pause_requests`, `pause_replies` and `pass` move between.

/// One direction through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Client to server.
    Requests,
    /// Server to client.
    Replies,
}

/// What the proxy holds back right now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Everything flows.
    #[default]
    Nothing,
    /// Client-to-server bytes are held; replies and notifications still reach the client.
    Requests,
    /// Server-to-client bytes are held; requests still reach the server and are applied.
    Replies,
    /// Both directions are held: a partition that TCP does not notice.
    Both,
}

impl Hold {
    /// Whether bytes going `dir` are held.
    pub(crate) fn holds(self, dir: Direction) -> bool {
        match (self, dir) {
            (Hold::Nothing, _) => false,
            (Hold::Both, _) => true,
            (Hold::Requests, d) => d == Direction::Requests,
            (Hold::Replies, d) => d == Direction::Replies,
        }
    }

    /// This state with `dir` held as well (holding one way on top of the other holds both).
    pub(crate) fn and(self, dir: Direction) -> Hold {
        match (self, dir) {
            (Hold::Both, _) => Hold::Both,
            (Hold::Nothing, Direction::Requests) | (Hold::Requests, Direction::Requests) => Hold::Requests,
            (Hold::Nothing, Direction::Replies) | (Hold::Replies, Direction::Replies) => Hold::Replies,
            (Hold::Requests, Direction::Replies) | (Hold::Replies, Direction::Requests) => Hold::Both,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Direction::*, Hold};

    #[test]
    fn holds_combine_into_both() {
        assert!(!Hold::Nothing.holds(Requests) && !Hold::Nothing.holds(Replies));
        assert!(Hold::Requests.holds(Requests) && !Hold::Requests.holds(Replies));
        assert!(!Hold::Replies.holds(Requests) && Hold::Replies.holds(Replies));
        assert!(Hold::Both.holds(Requests) && Hold::Both.holds(Replies));
        assert_eq!(Hold::Nothing.and(Requests), Hold::Requests);
        assert_eq!(Hold::Requests.and(Requests), Hold::Requests);
        assert_eq!(Hold::Requests.and(Replies), Hold::Both);
        assert_eq!(Hold::Replies.and(Requests), Hold::Both);
        assert_eq!(Hold::Both.and(Replies), Hold::Both);
    }
}
