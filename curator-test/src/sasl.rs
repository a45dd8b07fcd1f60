//! SASL DIGEST-MD5 for a [`TestingServer`](crate::TestingServer): a JAAS file whose `Server`
//! section lists the users (ZooKeeper's `DigestLoginModule`), and the settings that make the
//! server authenticate with it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::TestingError;

/// SASL settings of a [`TestingServer`](crate::TestingServer); see
/// [`TestingServerBuilder::sasl_digest_users`](crate::TestingServerBuilder::sasl_digest_users).
#[derive(Clone, Debug, Default)]
pub(crate) struct SaslSettings {
    pub(crate) users: Vec<(String, String)>,
    pub(crate) required: bool,
}

impl SaslSettings {
    /// Writes `jaas.conf` in `dir` and returns its path.
    pub(crate) fn write_jaas(&self, dir: &Path) -> Result<PathBuf, TestingError> {
        let mut jaas = String::from("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required");
        for (user, password) in &self.users {
            // Writing to a String cannot fail.
            let _ = write!(jaas, "\n    user_{user}=\"{}\"", password.replace('\\', "\\\\").replace('"', "\\\""));
        }
        jaas.push_str(";\n};\n");
        let path = dir.join("jaas.conf");
        std::fs::write(&path, jaas).map_err(|e| TestingError::io(format!("write {}", path.display()), e))?;
        Ok(path)
    }

    /// The `zoo.cfg` lines: the SASL authentication provider and, when SASL is required, the
    /// enforcement of authentication (ZooKeeper 3.7+: a session that has not authenticated with
    /// SASL is closed).
    pub(crate) fn cfg_lines(&self) -> Vec<String> {
        let mut lines =
            vec!["authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider".to_string()];
        if self.required {
            lines.push("enforce.auth.enabled=true".into());
            lines.push("enforce.auth.schemes=sasl".into());
            lines.push("sessionRequireClientSASLAuth=true".into());
        }
        lines
    }

    /// The java system property naming the JAAS file (ZooKeeper reads it from nowhere else).
    pub(crate) fn jaas_property(jaas: &Path) -> String {
        format!("-Djava.security.auth.login.config={}", jaas.display())
    }
}
