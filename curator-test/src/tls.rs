//! TLS for a [`TestingServer`](crate::TestingServer): a secure client port
//! (`secureClientPort`, served by ZooKeeper's `NettyServerCnxnFactory`) with keystores made at
//! test time by the JDK's `keytool`.
//!
//! [`TestingTls`] says what the server asks of clients; [`TlsFiles`] is what was generated, in
//! the server's directory:
//! - a CA (`ca.p12`, its certificate `ca.pem`);
//! - the server's key and certificate signed by the CA, for `127.0.0.1` and `localhost`
//!   (`server.p12`), and the server's trust store holding the CA (`trust.p12`), against which
//!   client certificates are checked;
//! - a client certificate signed by the CA with its key, as PEM (`client.pem`, `client-key.pem`),
//!   for client-auth tests;
//! - a second CA that signed nothing (`other-ca.pem`), for tests of a client that trusts the
//!   wrong CA.
//!
//! `keytool` cannot export a private key, so the client key is written by a small Java program
//! run from source (`java KeyExport.java`, a JDK feature since 11). Without a JDK the start fails
//! with an error naming the missing tool: a TLS test never skips.
//!
//! The set is generated once per process (fifteen JVM starts, over ten seconds of CPU) and each
//! TLS server gets its own copy of the same files in its directory: servers of one test binary
//! share the CA and the certificates, which no test tells apart.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::error::TestingError;

/// The password of every generated keystore (they live in a temporary directory).
pub const KEYSTORE_PASSWORD: &str = "curator-test";

/// TLS settings of a [`TestingServer`](crate::TestingServer); see
/// [`TestingServerBuilder::tls`](crate::TestingServerBuilder::tls).
#[derive(Clone, Debug, Default)]
pub struct TestingTls {
    need_client_auth: bool,
}

impl TestingTls {
    /// A secure port that does not ask clients for a certificate (`ssl.clientAuth=none`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the secure port requires a client certificate signed by the CA
    /// (`ssl.clientAuth=need`) instead of asking for none.
    pub fn need_client_auth(mut self, need: bool) -> Self {
        self.need_client_auth = need;
        self
    }

    /// Whether client certificates are required.
    pub fn requires_client_auth(&self) -> bool {
        self.need_client_auth
    }

    /// The `zoo.cfg` lines for a server with these settings, its files and its secure port.
    /// Unknown `zoo.cfg` keys become `zookeeper.`-prefixed system properties, which is how
    /// ZooKeeper reads the `ssl.*` and `serverCnxnFactory` settings.
    pub(crate) fn cfg_lines(&self, files: &TlsFiles, secure_port: u16) -> Vec<String> {
        vec![
            format!("secureClientPort={secure_port}"),
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".into(),
            format!("ssl.keyStore.location={}", files.server_keystore.display()),
            format!("ssl.keyStore.password={KEYSTORE_PASSWORD}"),
            "ssl.keyStore.type=PKCS12".into(),
            format!("ssl.trustStore.location={}", files.trust_store.display()),
            format!("ssl.trustStore.password={KEYSTORE_PASSWORD}"),
            "ssl.trustStore.type=PKCS12".into(),
            format!("ssl.clientAuth={}", if self.need_client_auth { "need" } else { "none" }),
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider".into(),
        ]
    }
}

/// The files generated for a TLS [`TestingServer`](crate::TestingServer). The PEM files are
/// what a client needs; the PKCS12 stores are the server's.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    dir: PathBuf,
    ca_pem: PathBuf,
    other_ca_pem: PathBuf,
    client_cert_pem: PathBuf,
    client_key_pem: PathBuf,
    server_keystore: PathBuf,
    trust_store: PathBuf,
}

impl TlsFiles {
    /// The directory holding every file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The CA's certificate (PEM): what a client trusts to accept the server.
    pub fn ca_pem(&self) -> &Path {
        &self.ca_pem
    }
    /// A CA certificate (PEM) that signed nothing the server uses: trusting it alone, a client
    /// must refuse the server.
    pub fn other_ca_pem(&self) -> &Path {
        &self.other_ca_pem
    }
    /// The client's certificate (PEM), signed by the CA.
    pub fn client_cert_pem(&self) -> &Path {
        &self.client_cert_pem
    }
    /// The client's private key (PKCS#8 PEM).
    pub fn client_key_pem(&self) -> &Path {
        &self.client_key_pem
    }
    /// The server's keystore (PKCS12, password [`KEYSTORE_PASSWORD`]).
    pub fn server_keystore(&self) -> &Path {
        &self.server_keystore
    }
    /// The server's trust store (PKCS12, password [`KEYSTORE_PASSWORD`]), holding the CA.
    pub fn trust_store(&self) -> &Path {
        &self.trust_store
    }

    /// Reads one of the PEM files as text.
    pub fn read(path: &Path) -> Result<String, TestingError> {
        std::fs::read_to_string(path).map_err(|e| TestingError::io(format!("read {}", path.display()), e))
    }

    /// Puts every file in `dir` (created if needed): a copy of the set this process generated
    /// with `keytool` and `java`, generating it first if none was yet.
    pub(crate) fn generate(dir: &Path) -> Result<TlsFiles, TestingError> {
        let contents = {
            // Held while generating: a second server waits for the first set instead of making
            // its own. A poisoned lock only means a generation panicked; the slot is still None.
            let mut slot = GENERATED.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(contents) => contents.clone(),
                None => {
                    let scratch = tempfile::Builder::new()
                        .prefix("curator-test-tls-")
                        .tempdir()
                        .map_err(|e| TestingError::io("create a temporary directory", e))?;
                    TlsFiles::make(scratch.path())?;
                    let contents = read_dir_files(scratch.path())?;
                    *slot = Some(contents.clone());
                    contents
                }
            }
        };
        std::fs::create_dir_all(dir).map_err(|e| TestingError::io(format!("create {}", dir.display()), e))?;
        for (name, bytes) in &contents {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| TestingError::io(format!("write {}", path.display()), e))?;
        }
        Ok(TlsFiles::named(dir))
    }

    /// The files' paths in `dir`.
    fn named(dir: &Path) -> TlsFiles {
        TlsFiles {
            dir: dir.to_path_buf(),
            ca_pem: dir.join("ca.pem"),
            other_ca_pem: dir.join("other-ca.pem"),
            client_cert_pem: dir.join("client.pem"),
            client_key_pem: dir.join("client-key.pem"),
            server_keystore: dir.join("server.p12"),
            trust_store: dir.join("trust.p12"),
        }
    }

    /// Generates every file in `dir` (which exists) with `keytool` and `java`.
    fn make(dir: &Path) -> Result<(), TestingError> {
        let files = TlsFiles::named(dir);
        let ca = dir.join("ca.p12");
        let other_ca = dir.join("other-ca.p12");
        let client = dir.join("client.p12");
        make_ca(&ca, "CN=curator-test-ca", &files.ca_pem)?;
        make_ca(&other_ca, "CN=curator-test-other-ca", &files.other_ca_pem)?;
        let server_pem = dir.join("server.pem");
        make_signed(
            &files.server_keystore,
            "server",
            "CN=localhost",
            "SAN=ip:127.0.0.1,dns:localhost",
            &ca,
            &files.ca_pem,
            &server_pem,
        )?;
        make_signed(
            &client,
            "client",
            "CN=curator-test-client",
            "EKU=clientAuth",
            &ca,
            &files.ca_pem,
            &files.client_cert_pem,
        )?;
        keytool(&["-importcert", "-noprompt", "-alias", "ca", "-file"], &[&files.ca_pem], &files.trust_store)?;
        export_key(&client, "client", &files.client_key_pem)
    }
}

/// Files by name, with their contents.
type Contents = Vec<(PathBuf, Vec<u8>)>;

/// The files of the set this process generated, once it has.
static GENERATED: Mutex<Option<Contents>> = Mutex::new(None);

/// Every regular file directly in `dir`, by name, with its contents.
fn read_dir_files(dir: &Path) -> Result<Contents, TestingError> {
    let what = || format!("read {}", dir.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| TestingError::io(what(), e))? {
        let entry = entry.map_err(|e| TestingError::io(what(), e))?;
        if entry.file_type().map_err(|e| TestingError::io(what(), e))?.is_file() {
            let bytes = std::fs::read(entry.path()).map_err(|e| TestingError::io(what(), e))?;
            out.push((PathBuf::from(entry.file_name()), bytes));
        }
    }
    Ok(out)
}

/// A JDK tool: `$JAVA_HOME/bin/NAME`, else `NAME` on `PATH`.
fn jdk_tool(name: &str) -> Result<PathBuf, TestingError> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let tool = Path::new(&home).join("bin").join(name);
        if tool.is_file() {
            return Ok(tool);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(name)).find(|t| t.is_file()).ok_or_else(|| {
        TestingError::Internal(format!(
            "the JDK's `{name}` is not installed (needed for a TLS TestingServer; scripts/ensure-deps installs a JDK)"
        ))
    })
}

/// Runs a command and fails with its output when it does not succeed.
fn run(mut command: Command, what: &str) -> Result<(), TestingError> {
    let output = command.output().map_err(|e| TestingError::io(format!("run {what}"), e))?;
    if output.status.success() {
        return Ok(());
    }
    Err(TestingError::Internal(format!(
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )))
}

/// `keytool ARGS... PATHS... -keystore STORE -storetype PKCS12 -storepass ...`.
fn keytool(args: &[&str], paths: &[&Path], store: &Path) -> Result<(), TestingError> {
    let mut command = Command::new(jdk_tool("keytool")?);
    command.args(args).args(paths).arg("-keystore").arg(store);
    command.args(["-storetype", "PKCS12", "-storepass", KEYSTORE_PASSWORD, "-keypass", KEYSTORE_PASSWORD]);
    run(command, &format!("keytool {}", args.first().copied().unwrap_or_default()))
}

/// A self-signed CA in `store` (alias `ca`), its certificate exported to `pem`.
fn make_ca(store: &Path, dname: &str, pem: &Path) -> Result<(), TestingError> {
    let gen = ["-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3", "-ext", "bc:c"];
    keytool(&[&gen[..], &["-dname", dname]].concat(), &[], store)?;
    keytool(&["-exportcert", "-rfc", "-alias", "ca", "-file"], &[pem], store)
}

/// A key pair in `store` (alias `alias`) whose certificate, signed by the CA in `ca` (with the
/// extension `ext`), replaces the self-signed one and is exported to `pem`.
fn make_signed(
    store: &Path,
    alias: &str,
    dname: &str,
    ext: &str,
    ca: &Path,
    ca_pem: &Path,
    pem: &Path,
) -> Result<(), TestingError> {
    let csr = store.with_extension("csr");
    keytool(
        &["-genkeypair", "-alias", alias, "-keyalg", "RSA", "-keysize", "2048", "-validity", "3", "-dname", dname],
        &[],
        store,
    )?;
    keytool(&["-certreq", "-alias", alias, "-file"], &[&csr], store)?;
    let mut command = Command::new(jdk_tool("keytool")?);
    command.args(["-gencert", "-rfc", "-alias", "ca", "-validity", "3", "-ext", ext, "-infile"]).arg(&csr);
    command.arg("-outfile").arg(pem).arg("-keystore").arg(ca);
    command.args(["-storetype", "PKCS12", "-storepass", KEYSTORE_PASSWORD]);
    run(command, "keytool -gencert")?;
    keytool(&["-importcert", "-noprompt", "-alias", "ca", "-file"], &[ca_pem], store)?;
    keytool(&["-importcert", "-noprompt", "-alias", alias, "-file"], &[pem], store)
}

/// The Java program that writes a keystore entry's private key as PKCS#8 PEM.
const KEY_EXPORT: &str = r#"import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.Base64;

public class KeyExport {
    public static void main(String[] args) throws Exception {
        char[] password = args[1].toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            store.load(in, password);
        }
        byte[] der = store.getKey(args[2], password).getEncoded();
        String body = Base64.getMimeEncoder(64, "\n".getBytes()).encodeToString(der);
        Files.writeString(Path.of(args[3]), "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n");
    }
}
"#;

/// Writes the private key of `alias` in `store` to `pem` (PKCS#8).
fn export_key(store: &Path, alias: &str, pem: &Path) -> Result<(), TestingError> {
    let source = store.with_file_name("KeyExport.java");
    std::fs::write(&source, KEY_EXPORT).map_err(|e| TestingError::io(format!("write {}", source.display()), e))?;
    let mut command = Command::new(jdk_tool("java")?);
    command.arg(&source).arg(store).arg(KEYSTORE_PASSWORD).arg(alias).arg(pem);
    run(command, "java KeyExport.java")
}
