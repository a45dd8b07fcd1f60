//! The requests a [`ChaosProxy`](super::ChaosProxy) passed on, in order, while recording.

use super::forward::opcode_of;
use super::RequestKind;

/// A client request the proxy passed on while recording
/// ([`ChaosProxy::record_requests`](super::ChaosProxy::record_requests)): what it asked for and
/// of which path, in the order the proxy read it (one connection's requests are in the order the
/// client sent them).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// Its ZooKeeper opcode (1 create, 2 delete, 4 getData, 8 and 12 getChildren, ...).
    pub opcode: i32,
    /// The path it names, for the requests whose body starts with one (create, delete, exists,
    /// getData, setData, getChildren, addWatch, removeWatches, ...); `None` for the others (a
    /// multi, a close).
    pub path: Option<String>,
}

impl SeenRequest {
    /// Whether it is a request of `kind`.
    pub fn is(&self, kind: RequestKind) -> bool {
        kind.matches(self.opcode)
    }

    /// Reads a client request frame (length, xid, opcode, body); `None` if it is too short.
    pub(super) fn parse(frame: &[u8]) -> Option<SeenRequest> {
        let opcode = opcode_of(frame)?;
        Some(SeenRequest { opcode, path: starts_with_path(opcode).then(|| path_at(frame, 12)).flatten() })
    }
}

/// Whether a request with `opcode` starts its body with a path: create (1, 15, 19, 21), delete
/// (2, 20), exists (3), getData (4), setData (5), getACL and setACL (6, 7), getChildren (8, 12),
/// sync (9), check (13), checkWatches and removeWatches (17, 18), getAllChildrenNumber (104),
/// addWatch (106).
fn starts_with_path(opcode: i32) -> bool {
    matches!(opcode, 1..=9 | 12 | 13 | 15 | 17..=21 | 104 | 106)
}

/// A jute string (a 4-byte big-endian length, then UTF-8) at `at`.
fn path_at(frame: &[u8], at: usize) -> Option<String> {
    let len = i32::from_be_bytes(frame.get(at..at + 4)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let bytes = frame.get(at + 4..at.checked_add(4)?.checked_add(len)?)?;
    String::from_utf8(bytes.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(xid: i32, opcode: i32, path: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&xid.to_be_bytes());
        body.extend_from_slice(&opcode.to_be_bytes());
        body.extend_from_slice(&(path.len() as i32).to_be_bytes());
        body.extend_from_slice(path.as_bytes());
        body.push(1); // a watch flag, say
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&body);
        f
    }

    #[test]
    fn reads_opcode_and_path() {
        let seen = SeenRequest::parse(&frame(7, 12, "/a/b")).unwrap();
        assert_eq!(seen, SeenRequest { opcode: 12, path: Some("/a/b".into()) });
        assert!(seen.is(RequestKind::GetChildren));
        assert_eq!(SeenRequest::parse(&frame(7, 14, "x")).unwrap().path, None);
        // Garbage: a length past the frame, a negative length, a short frame.
        let mut bad = frame(7, 2, "/a");
        bad[12..16].copy_from_slice(&1000i32.to_be_bytes());
        assert_eq!(SeenRequest::parse(&bad).unwrap().path, None);
        bad[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(SeenRequest::parse(&bad).unwrap().path, None);
        assert_eq!(SeenRequest::parse(&[0, 0, 0, 4, 0, 0, 0, 7]), None);
    }
}
