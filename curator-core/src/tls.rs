//! TLS to ZooKeeper's secure client port: [`TlsConfig`], given to
//! [`CuratorFrameworkBuilder::tls`](crate::CuratorFrameworkBuilder::tls).
//!
//! The connection itself is zookeeper-client's (rustls). With a `TlsConfig` every server of the
//! connect string is reached over TLS unless it is written `tcp://host:port`.
//!
//! # Why an attempt failed
//! zookeeper-client reports a pass over the servers in which none gave a session as "no hosts"
//! and logs each server's reason at debug level only. So when an attempt to open a session
//! fails, the session manager asks (with the private `diagnose`) what a TLS handshake with each
//! reachable server says: a certificate signed by a CA we do not trust, a name that does not
//! match, a server that refused our certificate, a plain port reached with TLS, or (without a
//! `TlsConfig`) a server that speaks TLS to a plain client. Any of these is a
//! [`CuratorError::Tls`] that operations and `block_until_connected` get at once, instead of
//! waiting out the connection timeout. The probe costs one more connection per failed attempt,
//! and attempts are spaced by the session manager's backoff (docs/architecture.md section 3.1).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};
use zookeeper_client as zk;

use crate::connect_string::{Scheme, Server};
use crate::error::{CuratorError, Result};

/// How long the diagnosis gives each server (connect, handshake, and a wait for an alert).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the diagnosis waits, after a handshake that succeeded, for the server to refuse the
/// client's certificate (TLS 1.3 servers say so after the handshake).
const ALERT_WAIT: Duration = Duration::from_millis(500);

/// TLS settings of a framework: the CA that signed the servers' certificates (PEM), optionally
/// a client identity (certificate chain and private key, PEM) for servers that require client
/// authentication (`ssl.clientAuth=need`), and whether the server's certificate must name the
/// host it was reached at (yes by default).
///
/// ```no_run
/// # fn f() -> curator_core::Result<()> {
/// use curator_core::{CuratorFramework, TlsConfig};
///
/// let tls = TlsConfig::from_ca_file("/etc/zookeeper/ca.pem")?
///     .with_identity_files("/etc/myapp/client.pem", "/etc/myapp/client-key.pem")?;
/// let client = CuratorFramework::builder().connect_string("zk1:2281,zk2:2281").tls(tls).build()?;
/// # Ok(()) }
/// ```
///
/// The PEM is checked when the framework is built: a file that holds no certificate, or a key
/// that cannot be read, is a [`CuratorError::Tls`] from `build()`.
#[derive(Clone)]
pub struct TlsConfig {
    ca_pem: String,
    identity: Option<(String, String)>,
    verify_hostname: bool,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca_pem_len", &self.ca_pem.len())
            .field("client_identity", &self.identity.is_some())
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

impl TlsConfig {
    /// Trust the CA certificates in `ca_pem` (PEM text, one or more certificates).
    pub fn new(ca_pem: impl Into<String>) -> Self {
        Self { ca_pem: ca_pem.into(), identity: None, verify_hostname: true }
    }

    /// [`new`](Self::new) with the PEM read from a file; a file that cannot be read is a
    /// [`CuratorError::Tls`].
    pub fn from_ca_file(path: impl AsRef<std::path::Path>) -> Result<Self> {
        Ok(Self::new(read(path.as_ref(), "CA certificate")?))
    }

    /// Present this client certificate chain (PEM) and its private key (PEM: PKCS#8, PKCS#1 or
    /// SEC1) to servers that ask for one.
    pub fn with_identity(mut self, cert_chain_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.identity = Some((cert_chain_pem.into(), key_pem.into()));
        self
    }

    /// [`with_identity`](Self::with_identity) with both read from files.
    pub fn with_identity_files(
        self,
        cert_chain: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> Result<Self> {
        let cert = read(cert_chain.as_ref(), "client certificate")?;
        let key = read(key.as_ref(), "client key")?;
        Ok(self.with_identity(cert, key))
    }

    /// Whether the server's certificate must be valid for the host name (or IP address) it was
    /// reached at (default `true`). Turning it off accepts any certificate signed by the CA,
    /// which lets a holder of any such certificate pose as the server.
    pub fn verify_hostname(mut self, verify: bool) -> Self {
        self.verify_hostname = verify;
        self
    }

    /// Checks the PEM: what `build()` calls.
    pub(crate) fn check(&self) -> Result<()> {
        self.options()?;
        self.rustls_config()?;
        Ok(())
    }

    /// zookeeper-client's options for these settings.
    pub(crate) fn options(&self) -> Result<zk::TlsOptions> {
        let mut options = zk::TlsOptions::new().with_pem_ca(&self.ca_pem).map_err(|e| bad_pem("CA certificate", e))?;
        if let Some((cert, key)) = &self.identity {
            options = options.with_pem_identity(cert, key).map_err(|e| bad_pem("client certificate or key", e))?;
        }
        if !self.verify_hostname {
            // SAFETY: not a memory-safety matter; zookeeper-client marks this `unsafe` because it
            // weakens the server's authentication, which `verify_hostname(false)` asks for.
            options = unsafe { options.with_no_hostname_verification() };
        }
        Ok(options)
    }

    /// A rustls configuration equal to what zookeeper-client builds, for [`diagnose`].
    fn rustls_config(&self) -> Result<Arc<ClientConfig>> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| bad_pem("CA certificate", e))?;
            roots.add(cert).map_err(|e| bad_pem("CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(bad_pem("CA certificate", "no certificate in the PEM"));
        }
        let verifier =
            WebPkiServerVerifier::builder(Arc::new(roots)).build().map_err(|e| bad_pem("CA certificate", e))?;
        let verifier: Arc<dyn ServerCertVerifier> =
            if self.verify_hostname { verifier } else { Arc::new(AnyName(verifier)) };
        let builder = ClientConfig::builder().dangerous().with_custom_certificate_verifier(verifier);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| bad_pem("client certificate", e))?;
                if chain.is_empty() {
                    return Err(bad_pem("client certificate", "no certificate in the PEM"));
                }
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| bad_pem("client key", e))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| bad_pem("client certificate or key", e))?
            }
        };
        Ok(Arc::new(config))
    }
}

fn read(path: &std::path::Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| CuratorError::Tls {
        server: String::new(),
        detail: format!("cannot read the {what} from {}: {e}", path.display()),
    })
}

fn bad_pem(what: &str, err: impl std::fmt::Display) -> CuratorError {
    CuratorError::Tls { server: String::new(), detail: format!("bad {what} PEM: {err}") }
}

/// Accepts a certificate signed by a trusted CA whatever names it holds.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// For a client without TLS: stops every handshake at the server's certificate, which shows
/// that the server speaks TLS.
#[derive(Debug)]
struct SpeaksTls(Vec<SignatureScheme>);

/// The marker error [`SpeaksTls`] stops a handshake with.
const SPEAKS_TLS: &str = "curator-rs: the server presented a TLS certificate";

impl ServerCertVerifier for SpeaksTls {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General(SPEAKS_TLS.into()))
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General(SPEAKS_TLS.into()))
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General(SPEAKS_TLS.into()))
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

/// Why the latest attempt to open a session failed, when TLS is the reason: a TLS handshake with
/// each server of `connect_string` that accepts a TCP connection, in order, with `tls`'s
/// settings or (without TLS) to see whether the server speaks TLS. `None` when no server shows a
/// TLS problem (it is down, or the cause is elsewhere). Blocking: run it off the runtime's
/// threads. Bounded by [`PROBE_TIMEOUT`] per server.
pub(crate) fn diagnose(connect_string: &str, tls: Option<&TlsConfig>) -> Option<CuratorError> {
    let config = match tls {
        Some(tls) => tls.rustls_config().ok()?,
        None => {
            let schemes = rustls::crypto::CryptoProvider::get_default()
                .map(|p| p.signature_verification_algorithms.supported_schemes())
                .unwrap_or_default();
            Arc::new(
                ClientConfig::builder()
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(SpeaksTls(schemes)))
                    .with_no_client_auth(),
            )
        }
    };
    let servers = crate::connect_string::parse(connect_string).map(|cs| cs.servers).unwrap_or_default();
    for Server { host, port, scheme } in servers {
        // An entry that asks for plain TCP is not expected to speak TLS.
        if scheme == Scheme::Plain && tls.is_some() {
            continue;
        }
        let server = format!("{host}:{port}");
        let Some(detail) = probe(host, port, config.clone(), tls.is_some()) else { continue };
        return Some(CuratorError::Tls { server, detail });
    }
    None
}

/// One server: `None` if TLS is not the problem there.
fn probe(host: &str, port: u16, config: Arc<ClientConfig>, secure: bool) -> Option<String> {
    let end = Instant::now() + PROBE_TIMEOUT;
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let mut socket = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).ok()?;
    let name = ServerName::try_from(host.to_string()).ok()?;
    let mut conn = ClientConnection::new(config, name).ok()?;
    let outcome = handshake(&mut conn, &mut socket, end);
    if !secure {
        return match outcome {
            Err(Failure::Tls(rustls::Error::General(m))) if m == SPEAKS_TLS => Some(
                "the server speaks TLS (a secure client port) but this framework has no TLS configured: \
                 give CuratorFrameworkBuilder::tls a TlsConfig, or use the server's plain client port"
                    .into(),
            ),
            _ => None,
        };
    }
    match outcome {
        Ok(()) => {
            // TLS 1.3 servers refuse a client certificate (or its absence) after the handshake.
            let mut buf = [0u8; 4096];
            let _ = socket.set_read_timeout(Some(ALERT_WAIT));
            match socket.read(&mut buf) {
                Ok(0) => Some("the server closed the connection right after the TLS handshake: it may require a client certificate (TlsConfig::with_identity) signed by a CA it trusts".into()),
                Ok(n) => match conn.read_tls(&mut &buf[..n]).map_err(|e| e.to_string()).and_then(|_| conn.process_new_packets().map(|_| ()).map_err(|e| e.to_string())) {
                    Err(e) => Some(format!("the server refused the connection after the TLS handshake: {e}")),
                    Ok(()) => None,
                },
                Err(_) => None,
            }
        }
        Err(Failure::Tls(e)) => Some(describe(&e)),
        Err(Failure::Closed) => Some(
            "the server closed the connection during the TLS handshake: it may be a plain client port \
             (ZooKeeper's secureClientPort is another), or it refused the client's certificate"
                .into(),
        ),
        Err(Failure::Io) => None,
    }
}

enum Failure {
    Tls(rustls::Error),
    Closed,
    Io,
}

/// Drives a handshake over a blocking socket until it completes, fails, or `end` passes.
fn handshake(conn: &mut ClientConnection, socket: &mut TcpStream, end: Instant) -> std::result::Result<(), Failure> {
    let mut buf = [0u8; 16 * 1024];
    while conn.is_handshaking() {
        while conn.wants_write() {
            let mut out = Vec::new();
            conn.write_tls(&mut out).map_err(|_| Failure::Io)?;
            socket.write_all(&out).map_err(|_| Failure::Closed)?;
        }
        if !conn.is_handshaking() {
            break;
        }
        let left = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or(Failure::Io)?;
        socket.set_read_timeout(Some(left)).map_err(|_| Failure::Io)?;
        let n = match socket.read(&mut buf) {
            Ok(0) => return Err(Failure::Closed),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(Failure::Io)
            }
            Err(_) => return Err(Failure::Closed),
        };
        conn.read_tls(&mut &buf[..n]).map_err(|_| Failure::Io)?;
        if let Err(e) = conn.process_new_packets() {
            // Send the alert, as a real client would, then report.
            let mut out = Vec::new();
            let _ = conn.write_tls(&mut out);
            let _ = socket.write_all(&out);
            return Err(Failure::Tls(e));
        }
    }
    // The client's last flight (Finished, and its certificate if asked).
    while conn.wants_write() {
        let mut out = Vec::new();
        conn.write_tls(&mut out).map_err(|_| Failure::Io)?;
        socket.write_all(&out).map_err(|_| Failure::Closed)?;
    }
    Ok(())
}

/// A handshake error in words an operator can act on.
fn describe(err: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match err {
        rustls::Error::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => format!(
            "the server's certificate is not signed by a CA this client trusts ({err}): check TlsConfig's CA"
        ),
        rustls::Error::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => format!(
            "the server's certificate does not name the host it was reached at ({err}): connect by a name it holds, or TlsConfig::verify_hostname(false)"
        ),
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. }) => {
            format!("the server's certificate is outside its validity period ({err})")
        }
        rustls::Error::AlertReceived(alert) => {
            format!("the server refused the TLS handshake ({alert:?}): it may require a client certificate (TlsConfig::with_identity) signed by a CA it trusts")
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            format!("the server did not answer in TLS ({err}): is this a plain client port? ZooKeeper's secureClientPort is another")
        }
        other => format!("TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_a_typed_error() {
        let err = TlsConfig::new("not a certificate").check().unwrap_err();
        assert!(matches!(err, CuratorError::Tls { .. }), "{err}");
    }
}
