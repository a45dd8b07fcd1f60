//! What the framework's session code sees of TLS and SASL when their features are left out
//! (crate docs, "Features"): settings that cannot be made (uninhabited types), so that the
//! builder's and the session manager's code reads the same either way and every `Option` of
//! them is `None`.

/// TLS without the `tls` feature.
#[cfg(not(feature = "tls"))]
pub(crate) mod tls {
    use crate::error::{CuratorError, Result};

    /// No TLS settings can be made.
    #[derive(Clone, Debug)]
    pub(crate) enum TlsConfig {}

    impl TlsConfig {
        pub(crate) fn check(&self) -> Result<()> {
            match *self {}
        }
    }

    /// Without rustls there is no handshake to ask why an attempt failed.
    pub(crate) fn diagnose(_connect_string: &str, _tls: Option<&TlsConfig>) -> Option<CuratorError> {
        None
    }
}

/// SASL without the `sasl` feature.
#[cfg(not(feature = "sasl"))]
pub(crate) mod sasl {
    /// No SASL settings can be made.
    #[derive(Clone, Debug)]
    pub(crate) enum SaslConfig {}

    impl SaslConfig {
        pub(crate) fn username(&self) -> &str {
            match *self {}
        }
        pub(crate) fn mechanism(&self) -> &'static str {
            match *self {}
        }
    }
}
