//! SASL authentication of every session: [`SaslConfig`], given to
//! [`CuratorFrameworkBuilder::sasl`](crate::CuratorFrameworkBuilder::sasl) or
//! [`sasl_digest`](crate::CuratorFrameworkBuilder::sasl_digest).
//!
//! Only DIGEST-MD5 is built (zookeeper-client's `sasl-digest-md5`; GSSAPI/Kerberos needs system
//! libraries this crate does not link). The server checks the user and password against the
//! `Server` section of its JAAS file (`DigestLoginModule`); nodes can then be given `sasl`
//! ACLs naming the user (`Acl::new(Permission::ALL, AuthId::new("sasl", "alice"))`).
//!
//! A refused password ends the session attempt with ZooKeeper's AUTH_FAILED. The framework
//! treats that as final, as ZooKeeper's Java client does: it stops opening sessions, and every
//! operation and `block_until_connected` fails at once with [`CuratorError::AuthFailed`]
//! (docs/architecture.md section 3.1).
//!
//! [`CuratorError::AuthFailed`]: crate::CuratorError::AuthFailed

use zookeeper_client as zk;

/// The SASL credentials every session authenticates with.
#[derive(Clone)]
pub struct SaslConfig {
    mechanism: Mechanism,
}

#[derive(Clone)]
enum Mechanism {
    DigestMd5 { username: String, password: String },
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.mechanism {
            Mechanism::DigestMd5 { username, .. } => f
                .debug_struct("SaslConfig")
                .field("mechanism", &"DIGEST-MD5")
                .field("username", username)
                .finish_non_exhaustive(),
        }
    }
}

impl SaslConfig {
    /// DIGEST-MD5 with this user and password (the server's JAAS file lists the user as
    /// `user_NAME="password"`).
    pub fn digest_md5(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self { mechanism: Mechanism::DigestMd5 { username: username.into(), password: password.into() } }
    }

    /// The user name.
    pub fn username(&self) -> &str {
        match &self.mechanism {
            Mechanism::DigestMd5 { username, .. } => username,
        }
    }

    /// The mechanism's name, as SASL names it.
    pub fn mechanism(&self) -> &'static str {
        match &self.mechanism {
            Mechanism::DigestMd5 { .. } => "DIGEST-MD5",
        }
    }

    /// zookeeper-client's options.
    pub(crate) fn options(&self) -> zk::SaslOptions {
        match &self.mechanism {
            Mechanism::DigestMd5 { username, password } => {
                zk::SaslOptions::digest_md5(username.clone(), password.clone()).into()
            }
        }
    }
}
