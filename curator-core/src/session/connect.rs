//! Opening a session (docs/architecture.md section 3.1, step 1): one attempt is one pass over
//! the servers of the current ensemble; failed attempts back off under
//! `ExponentialBackoffForever`, and each failure is recorded in the shared state so that
//! operations and `block_until_connected` can say why nothing answered. A cause waiting cannot
//! cure is recorded as a typed error that they get at once: TLS (found by asking the servers,
//! `crate::tls::diagnose`; the manager keeps retrying) and refused credentials (final: the
//! manager stops). Also how every client of the framework is built ([`connector`], [`open`]),
//! the closer's included.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::builder::Config;
use crate::error::CuratorError;
use crate::retry::{ExponentialBackoffForever, RetryLoop};
use crate::shared::Shared;

/// Pause after the first failed attempt to open a session; it doubles with each failure in a
/// row, up to [`MAX_RECONNECT_PAUSE`].
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Longest pause between attempts to open a session.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(5);

/// Opens a new session, retrying until one is had or the framework shuts down.
///
/// One attempt is one pass over the servers of the connect string (zookeeper-client's
/// `fail_eagerly`): the client bounds each server's TCP connect and handshake by its own
/// connection timeout (2/5 of the session timeout) and the whole pass by the session timeout.
/// The framework's connection timeout plays no part here: it is how long an *operation* waits
/// for a connection (docs/architecture.md section 3.4), as in Curator. Between attempts the
/// manager backs off under [`ExponentialBackoffForever`], from [`RECONNECT_PAUSE`] to
/// [`MAX_RECONNECT_PAUSE`]; the first failure of a streak is a warning, the others are debug
/// events, and the session that ends a streak is logged once with the number of failures.
///
/// Fatal causes (docs/architecture.md section 3.1): after each failed attempt, [`crate::tls::diagnose`]
/// asks the servers whether TLS is why (a wrong CA, a refused client certificate, a plain client
/// on a secure port or the reverse); if so the typed [`CuratorError::Tls`] is recorded, so that
/// operations and `block_until_connected` fail with it at once, and the manager keeps retrying
/// with its backoff (a server's certificate can be replaced while we wait). A refused credential
/// (AUTH_FAILED: a wrong SASL password) is final: [`CuratorError::AuthFailed`] is recorded and
/// the manager stops, as ZooKeeper's Java client gives up its handle on AUTH_FAILED.
///
/// The servers are those of the current ensemble (docs/architecture.md section 3.7),
/// returned with the client. With `resume`, the client re-establishes that session instead of
/// opening a new one, and `None` comes back as soon as a server says it expired.
pub(super) async fn connect(
    shared: &Weak<Shared>,
    shutdown: &mut watch::Receiver<bool>,
    resume: Option<zk::SessionInfo>,
) -> Option<(zk::Client, String)> {
    let mut retry =
        RetryLoop::stopping_when(Arc::new(ExponentialBackoffForever::new(RECONNECT_PAUSE, MAX_RECONNECT_PAUSE)), None);
    let mut failures = 0u32;
    let mut tls_failing = false;
    loop {
        if *shutdown.borrow() {
            return None;
        }
        let (connector, connect_string, tls, refused) = {
            let strong = shared.upgrade()?;
            let config = &strong.config;
            let mut connector = match connector(config, config.ensemble.enabled()) {
                Ok(connector) => connector,
                // Checked at build(); an error here would be a bug, reported as the attempt's.
                Err(err) => {
                    strong.set_connect_failure(err);
                    return None;
                }
            };
            if let Some(session) = &resume {
                connector = connector.with_session(session.clone());
            }
            (connector, config.ensemble.current(), config.tls.clone(), config.auth_failed_detail())
        };
        tracing::debug!(connect_string = %connect_string, tls = tls.is_some(), "opening a session");
        let attempt = open(connector, &connect_string, tls.is_some());
        let error = tokio::select! {
            _ = shutdown.changed() => return None,
            result = attempt => match result {
                Ok(client) => {
                    if let Some(strong) = shared.upgrade() {
                        strong.set_connect_error(None);
                    }
                    if failures == 0 {
                        tracing::info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session opened");
                    } else {
                        tracing::info!(session = %client.session_id(), timeout = ?client.session_timeout(), failures, "session opened after failed attempts");
                    }
                    return Some((client, connect_string));
                }
                Err(zk::Error::SessionExpired) if resume.is_some() => {
                    tracing::warn!(connect_string = %connect_string, "the session expired before it could be moved");
                    return None;
                }
                // With `fail_eagerly`, a pass in which no server gave a session ends so; the
                // reason of each server is logged by zookeeper-client at debug level.
                Err(zk::Error::NoHosts) => "no server answered with a session".to_string(),
                // Refused credentials are final, as for ZooKeeper's Java client (AUTH_FAILED
                // ends its handle for good): retrying cannot make a wrong password right, and
                // each retry would be one more failed login in the server's log. The manager
                // stops; operations fail at once with AuthFailed until the framework is closed.
                Err(zk::Error::AuthFailed) => {
                    let detail = refused;
                    tracing::error!(connect_string = %connect_string, "{detail}");
                    crate::metrics::connect_failed();
                    let strong = shared.upgrade()?;
                    strong.set_connect_failure(CuratorError::AuthFailed { detail });
                    return None;
                }
                Err(err) => err.to_string(),
            },
        };
        failures += 1;
        crate::metrics::connect_failed();
        // zookeeper-client keeps each server's reason to itself: ask the servers whether TLS is
        // the reason (crate::tls), off the runtime's threads and bounded per server, after every
        // failed attempt (one probe connection per attempt, and attempts back off): a probe a
        // loaded server did not answer in time finds nothing, and asking only after the first
        // failure of a streak left every later one undiagnosed (issue 40 item 8); asking again
        // also keeps the recorded cause true while it lasts.
        let diagnosis = {
            let connect_string = connect_string.clone();
            let probe = tokio::task::spawn_blocking(move || crate::tls::diagnose(&connect_string, tls.as_ref()));
            tokio::select! {
                _ = shutdown.changed() => return None,
                found = probe => found.ok().flatten(),
            }
        };
        let shown = diagnosis.as_ref().map_or_else(|| error.clone(), ToString::to_string);
        if failures == 1 {
            tracing::warn!(connect_string = %connect_string, error = %shown, "could not open a session; retrying with backoff");
        } else {
            tracing::debug!(connect_string = %connect_string, error = %shown, failures, "could not open a session");
        }
        let strong = shared.upgrade()?;
        let pause =
            retry.next_pause(&CuratorError::NotConnected { detail: error.clone() }).unwrap_or(MAX_RECONNECT_PAUSE);
        let was_failing = std::mem::replace(&mut tls_failing, diagnosis.is_some());
        match diagnosis {
            Some(found) => strong.set_connect_failure(found),
            None => {
                if was_failing {
                    // TLS is no longer the reason: operations wait for a connection again.
                    strong.set_connect_error(None);
                }
                strong.set_connect_error(Some(error));
            }
        }
        drop(strong);
        tokio::select! {
            _ = shutdown.changed() => return None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// How a client is opened. `detached`: dropping its last clone does not close the session;
/// the framework's clients are, while the ensemble tracker is on, so that a session can move
/// to another client (docs/architecture.md section 3.7); a [`Closer`](super::Closer) then closes it.
/// The builder's authentication, SASL and TLS options are applied here, so that every client
/// of the framework (the sessions' and [`Closer`](super::Closer)'s) has them; open it with [`open`].
pub(super) fn connector(config: &Config, detached: bool) -> Result<zk::Connector, CuratorError> {
    let mut connector = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_readonly(config.can_be_read_only)
        .with_fail_eagerly();
    for (scheme, auth) in &config.auth {
        connector = connector.with_auth(scheme, auth);
    }
    #[cfg(feature = "sasl")]
    if let Some(sasl) = &config.sasl {
        connector = connector.with_sasl(sasl.options());
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        connector = connector.with_tls(tls.options()?);
    }
    if detached {
        connector = connector.with_detached();
    }
    Ok(connector)
}

/// Opens a client from `connector` on `servers`, over TLS if the framework has it.
pub(super) async fn open(connector: zk::Connector, servers: &str, tls: bool) -> Result<zk::Client, zk::Error> {
    #[cfg(feature = "tls")]
    if tls {
        return connector.secure_connect(servers).await;
    }
    // Without the `tls` feature there is no TlsConfig, so `tls` is false.
    #[cfg(not(feature = "tls"))]
    let _ = tls;
    connector.connect(servers).await
}
