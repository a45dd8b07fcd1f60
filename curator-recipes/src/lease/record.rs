//! The data of a [`TimedLease`](super::TimedLease)'s node: who holds it, for how long, which
//! write made it and which grant it stands for (docs/architecture.md section 20).
//!
//! Five text lines, UTF-8:
//!
//! ```text
//! curator-rs timed lease 2
//! holder=<the holder's id>
//! duration_ms=<the lease's duration in milliseconds>
//! write=<a UUID unique to the write>
//! grant=<a UUID unique to the grant>
//! ```
//!
//! The first line names the format and its version; a later version is refused (as kazoo's
//! `NonBlockingLease` leaves a lease written by a newer format alone). The `write` id tells a
//! writer whose reply was lost whether the node holds its own write. The `grant` id names the
//! grant's fence, the child `grant-<id>` of the lease node ([`grant_child`]). Format 1 (the
//! first four lines, no grant) is read as a lease whose grant has no fence: a taker deletes it
//! and makes it again.

use std::time::Duration;

use curator_core::{CuratorError, Result};
use uuid::Uuid;

/// The first line's words before the format version.
const MAGIC: &str = "curator-rs timed lease";
/// The format this code writes (and the latest it reads).
pub(crate) const FORMAT: u32 = 2;
/// The first format, without a grant id: still read.
const FORMAT_WITHOUT_GRANT: u32 = 1;
/// The name prefix of a grant's fence, a child of the lease node.
pub(crate) const GRANT_PREFIX: &str = "grant-";
/// The longest holder id, in bytes.
pub(crate) const MAX_HOLDER_LEN: usize = 1024;
/// The longest lease: one year (an `Instant` this far ahead is representable everywhere).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// One write of the lease node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) holder: String,
    pub(crate) duration: Duration,
    pub(crate) write: Uuid,
    /// The grant the write stands for; `None` in a format 1 record (no fence).
    pub(crate) grant: Option<Uuid>,
}

/// The path of the fence of grant `grant` of the lease node `lease`: `<lease>/grant-<uuid>`.
pub(crate) fn grant_child(lease: &str, grant: Uuid) -> String {
    format!("{lease}/{GRANT_PREFIX}{}", grant.as_hyphenated())
}

/// Checks a holder id: not empty, one line, at most [`MAX_HOLDER_LEN`] bytes.
pub(crate) fn check_holder(path: &str, holder: &str) -> Result<()> {
    let reason = if holder.is_empty() {
        "the holder id is empty".to_string()
    } else if holder.contains(['\n', '\r']) {
        "the holder id must be one line".to_string()
    } else if holder.len() > MAX_HOLDER_LEN {
        format!("the holder id is {} bytes, at most {MAX_HOLDER_LEN} allowed", holder.len())
    } else {
        return Ok(());
    };
    Err(CuratorError::InvalidArgument { path: path.to_string(), reason })
}

/// Checks a duration: at least 1 ms, at most [`MAX_DURATION`].
pub(crate) fn check_duration(path: &str, duration: Duration) -> Result<()> {
    if duration < Duration::from_millis(1) || duration > MAX_DURATION {
        return Err(CuratorError::InvalidArgument {
            path: path.to_string(),
            reason: format!("a lease lasts from 1 ms to {} s, not {duration:?}", MAX_DURATION.as_secs()),
        });
    }
    Ok(())
}

impl Record {
    /// A write by `holder` for the grant `grant` (with a fresh write id): a new grant's, or a
    /// renewal's of that grant.
    pub(crate) fn new(holder: &str, duration: Duration, grant: Uuid) -> Self {
        Self { holder: holder.to_string(), duration, write: Uuid::new_v4(), grant: Some(grant) }
    }

    /// The node's bytes (always this format: a record is only written with a grant).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let grant = self.grant.map(|g| g.as_hyphenated().to_string()).unwrap_or_default();
        format!(
            "{MAGIC} {FORMAT}\nholder={}\nduration_ms={}\nwrite={}\ngrant={grant}\n",
            self.holder,
            millis_rounded_up(self.duration),
            self.write.as_hyphenated()
        )
        .into_bytes()
    }

    /// Reads the node `path`'s bytes: anything but this format's five lines (or format 1's
    /// four), with a holder and a duration [`Record::new`] accepts, is
    /// [`BadData`](CuratorError::BadData).
    pub(crate) fn decode(path: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: String| CuratorError::BadData { path: path.to_string(), reason };
        let text = std::str::from_utf8(bytes).map_err(|_| bad(format!("not a timed lease: {}", shown(bytes))))?;
        let mut lines = text.lines();
        let format = lines
            .next()
            .and_then(|first| first.strip_prefix(MAGIC))
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| bad(format!("not a timed lease: {}", shown(bytes))))?;
        if format != FORMAT && format != FORMAT_WITHOUT_GRANT {
            return Err(bad(format!("a timed lease of format {format}; this reads formats 1 to {FORMAT}")));
        }
        let mut field = |name: &str| {
            lines
                .next()
                .and_then(|line| line.strip_prefix(name))
                .and_then(|line| line.strip_prefix('='))
                .ok_or_else(|| bad(format!("a timed lease without its {name} line: {}", shown(bytes))))
        };
        let holder = field("holder")?.to_string();
        let millis = field("duration_ms")?;
        let write = field("write")?;
        let duration = millis
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| bad(format!("a timed lease with the duration {millis:?}")))?;
        let write = Uuid::parse_str(write).map_err(|_| bad(format!("a timed lease with the write id {write:?}")))?;
        let grant = match format {
            FORMAT_WITHOUT_GRANT => None,
            _ => {
                let grant = field("grant")?;
                Some(Uuid::parse_str(grant).map_err(|_| bad(format!("a timed lease with the grant id {grant:?}")))?)
            }
        };
        if let Some(extra) = lines.next() {
            return Err(bad(format!("a timed lease with more lines than its format's: {extra:?}")));
        }
        check_holder(path, &holder).map_err(|e| bad(e.to_string()))?;
        check_duration(path, duration).map_err(|e| bad(e.to_string()))?;
        Ok(Self { holder, duration, write, grant })
    }
}

/// `duration` in whole milliseconds, rounded up: a contender reading it never waits less than
/// the holder holds.
fn millis_rounded_up(duration: Duration) -> u128 {
    duration.as_nanos().div_ceil(1_000_000)
}

/// At most 64 bytes of `bytes`, for an error message.
fn shown(bytes: &[u8]) -> String {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned();
    if bytes.len() > 64 {
        format!("{head:?}...")
    } else {
        format!("{head:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, duration: Duration) -> Record {
        Record::new(holder, duration, Uuid::new_v4())
    }

    #[test]
    fn round_trip() {
        let record = record("host-1", Duration::from_millis(1500));
        assert_eq!(Record::decode("/l", &record.encode()).expect("decode"), record);
        assert_eq!(
            grant_child("/a/l", record.grant.expect("grant")),
            format!("/a/l/grant-{}", record.grant.expect("grant").as_hyphenated())
        );
    }

    #[test]
    fn format_1_is_read_without_a_grant() {
        let write = Uuid::new_v4();
        let text = format!("curator-rs timed lease 1\nholder=old\nduration_ms=5\nwrite={write}\n");
        let read = Record::decode("/l", text.as_bytes()).expect("format 1");
        assert_eq!(read, Record { holder: "old".into(), duration: Duration::from_millis(5), write, grant: None });
    }

    #[test]
    fn durations_round_up_to_whole_milliseconds() {
        let record = record("h", Duration::from_micros(1500));
        assert_eq!(Record::decode("/l", &record.encode()).expect("decode").duration, Duration::from_millis(2));
    }

    #[test]
    fn garbage_is_bad_data() {
        let good = String::from_utf8(record("h", Duration::from_secs(1)).encode()).expect("utf8");
        let newer = good.replace("lease 2", "lease 3");
        let zero = good.replace("duration_ms=1000", "duration_ms=0");
        let huge = good.replace("duration_ms=1000", "duration_ms=99999999999999");
        let no_write = good.lines().take(3).collect::<Vec<_>>().join("\n");
        let no_grant = good.lines().take(4).collect::<Vec<_>>().join("\n");
        let bad_grant = good.lines().take(4).chain(["grant=x"]).collect::<Vec<_>>().join("\n");
        let more = format!("{good}more=1\n");
        for bytes in [
            &b""[..],
            b"\xff\xfe",
            b"foo",
            newer.as_bytes(),
            zero.as_bytes(),
            huge.as_bytes(),
            no_write.as_bytes(),
            no_grant.as_bytes(),
            bad_grant.as_bytes(),
            more.as_bytes(),
        ] {
            let err = Record::decode("/l", bytes).expect_err("garbage");
            assert!(matches!(err, CuratorError::BadData { .. }), "{err}");
        }
        assert!(Record::decode("/l", newer.as_bytes()).expect_err("newer").to_string().contains("format 3"));
    }

    #[test]
    fn bad_holders_and_durations() {
        for holder in ["", "a\nb", &"x".repeat(MAX_HOLDER_LEN + 1)] {
            assert!(matches!(check_holder("/l", holder), Err(CuratorError::InvalidArgument { .. })));
        }
        for duration in [Duration::ZERO, Duration::from_micros(999), MAX_DURATION + Duration::from_secs(1)] {
            assert!(matches!(check_duration("/l", duration), Err(CuratorError::InvalidArgument { .. })));
        }
        assert!(check_duration("/l", Duration::from_millis(1)).is_ok());
    }
}
