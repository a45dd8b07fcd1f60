//! Compression of node data (Curator's `CompressionProvider`): the framework's provider
//! compresses what `compressed()` writes and decompresses what `decompressed()` reads, and
//! with [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression) every
//! create, data write (transactions included) and data read does so unless told
//! `uncompressed()` / `undecompressed()`. Design: docs/architecture.md section 3.10.

use std::borrow::Cow;
use std::fmt::Debug;

use crate::error::{CuratorError, Result};
use crate::CuratorFramework;

/// Compresses and decompresses node data for the framework (Curator's `CompressionProvider`).
/// Given with [`CuratorFrameworkBuilder::compression_provider`](crate::CuratorFrameworkBuilder::compression_provider);
/// [`GzipCompressionProvider`] by default.
///
/// ```
/// use curator_core::{CompressionProvider, CuratorError};
///
/// /// Stores data twice over, as Curator's `TestCompression` does: easy to see on the server.
/// #[derive(Debug)]
/// struct Doubling;
///
/// impl CompressionProvider for Doubling {
///     fn compress(&self, _path: &str, data: &[u8]) -> curator_core::Result<Vec<u8>> {
///         Ok([data, data].concat())
///     }
///     fn decompress(&self, path: &str, data: &[u8]) -> curator_core::Result<Vec<u8>> {
///         let (a, b) = data.split_at(data.len() / 2);
///         if a != b {
///             return Err(CuratorError::BadData { path: path.into(), reason: "not doubled".into() });
///         }
///         Ok(a.to_vec())
///     }
/// }
///
/// let fw = curator_core::CuratorFramework::builder()
///     .connect_string("127.0.0.1:2181")
///     .compression_provider(Doubling)
///     .build()?;
/// # Ok::<(), CuratorError>(())
/// ```
pub trait CompressionProvider: Send + Sync + Debug + 'static {
    /// The bytes to store for `data` written to `path` (relative to the framework's
    /// namespace). An error fails the write before anything is sent.
    fn compress(&self, path: &str, data: &[u8]) -> Result<Vec<u8>>;

    /// The data stored as `data` at `path`. Data that was not written compressed should be
    /// [`CuratorError::BadData`] with the path.
    fn decompress(&self, path: &str, data: &[u8]) -> Result<Vec<u8>>;
}

/// Gzip, Curator's default (`GzipCompressionProvider`): what either side compresses, the other
/// decompresses. Without curator-core's `compression` feature both directions fail with
/// [`CuratorError::InvalidArgument`] naming it (and `build()` refuses `enable_compression()`
/// with this provider).
#[derive(Debug, Clone, Copy, Default)]
pub struct GzipCompressionProvider;

impl CompressionProvider for GzipCompressionProvider {
    fn compress(&self, path: &str, data: &[u8]) -> Result<Vec<u8>> {
        gzip(path, data)
    }

    fn decompress(&self, path: &str, data: &[u8]) -> Result<Vec<u8>> {
        gunzip(path, data)
    }
}

/// The one place node data is compressed and decompressed: the fluent operations (with their
/// own `compressed()` / `decompressed()` choice, if any) and the recipes and caches that work on
/// the session's raw client (with the framework's default) all come here (docs/architecture.md
/// section 3.10).
impl CuratorFramework {
    /// The bytes this framework stores for `data` written to `path` by a recipe: compressed by
    /// the framework's [`CompressionProvider`] under
    /// [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression), `data`
    /// itself (borrowed, not copied) otherwise. Empty data is compressed too, as Curator does.
    /// A provider's error (gzip without the `compression` feature:
    /// [`CuratorError::InvalidArgument`]) fails the write before anything is sent.
    ///
    /// For code that writes node data on the session's raw client
    /// ([`Session::client`](crate::Session::client)); the fluent operations do this themselves.
    pub fn encode_data<'d>(&self, path: &str, data: &'d [u8]) -> Result<Cow<'d, [u8]>> {
        if self.compression_enabled() {
            self.config().compression.compress(path, data).map(Cow::Owned)
        } else {
            Ok(Cow::Borrowed(data))
        }
    }

    /// The data a recipe sees for `data` read from `path` on the session's raw client:
    /// decompressed under [`enable_compression`](crate::CuratorFrameworkBuilder::enable_compression),
    /// `data` itself (moved, not copied) otherwise. Data that does not decompress is
    /// [`CuratorError::BadData`] with the path, as from `get_data()`.
    pub fn decode_data(&self, path: &str, data: Vec<u8>) -> Result<Vec<u8>> {
        self.decode_data_if(None, path, data)
    }

    /// [`encode_data`](Self::encode_data) for owned data, with an operation's own choice
    /// (`compressed()` / `uncompressed()`) over the default.
    pub(crate) fn encode_data_if(&self, choice: Option<bool>, path: &str, data: Vec<u8>) -> Result<Vec<u8>> {
        if choice.unwrap_or(self.compression_enabled()) {
            self.config().compression.compress(path, &data)
        } else {
            Ok(data)
        }
    }

    /// [`decode_data`](Self::decode_data) with an operation's own choice (`decompressed()` /
    /// `undecompressed()`) over the default.
    pub(crate) fn decode_data_if(&self, choice: Option<bool>, path: &str, data: Vec<u8>) -> Result<Vec<u8>> {
        if choice.unwrap_or(self.compression_enabled()) {
            self.config().compression.decompress(path, &data)
        } else {
            Ok(data)
        }
    }
}

/// Whether gzip is built in: without curator-core's `compression` feature, an
/// [`InvalidArgument`](CuratorError::InvalidArgument) naming it.
pub(crate) fn check_gzip(path: &str) -> Result<()> {
    if cfg!(feature = "compression") {
        Ok(())
    } else {
        Err(CuratorError::InvalidArgument {
            path: path.to_string(),
            reason: "compressed data needs curator-core's `compression` feature, which this build leaves out".into(),
        })
    }
}

/// Gzip (without the `compression` feature, the error of [`check_gzip`]).
fn gzip(path: &str, data: &[u8]) -> Result<Vec<u8>> {
    check_gzip(path)?;
    #[cfg(feature = "compression")]
    {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing to a Vec cannot fail.
        let _ = encoder.write_all(data);
        Ok(encoder.finish().unwrap_or_default())
    }
    #[cfg(not(feature = "compression"))]
    Ok(data.to_vec())
}

/// Un-gzips the data of `path` (without the `compression` feature, the error of
/// [`check_gzip`]).
fn gunzip(path: &str, data: &[u8]) -> Result<Vec<u8>> {
    check_gzip(path)?;
    #[cfg(feature = "compression")]
    {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .map_err(|e| CuratorError::BadData { path: path.to_string(), reason: format!("not gzip data: {e}") })?;
        Ok(out)
    }
    #[cfg(not(feature = "compression"))]
    Ok(data.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gzip round trip with the feature; with it left out, a typed error naming the feature
    /// (never a panic), for writes and reads alike.
    #[test]
    fn gzip_follows_the_feature() {
        let gz = GzipCompressionProvider;
        let data = b"hello hello hello".to_vec();
        if cfg!(feature = "compression") {
            let packed = gz.compress("/a", &data).expect("gzip");
            assert_ne!(packed, data);
            assert_eq!(gz.decompress("/a", &packed).expect("gunzip"), data);
            assert!(matches!(gz.decompress("/a", b"plain"), Err(CuratorError::BadData { .. })));
        } else {
            for err in [gz.compress("/a", &data).unwrap_err(), gz.decompress("/a", &data).unwrap_err()] {
                match err {
                    CuratorError::InvalidArgument { path, reason } => {
                        assert_eq!(path, "/a");
                        assert!(reason.contains("`compression` feature"), "{reason}");
                    }
                    other => panic!("not InvalidArgument: {other:?}"),
                }
            }
        }
    }
}
