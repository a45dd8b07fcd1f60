//! How a queue turns its items into bytes and back (Curator's `QueueSerializer`).

use curator_core::{CuratorError, Result};

/// Turns items of type `T` into the bytes of one framed item and back. A failure is a typed
/// error: [`CuratorError::BadData`] for bytes that are not a `T` (the queue then reports the
/// item node and skips it), [`CuratorError::InvalidArgument`] for an item that cannot be
/// written (`put` returns it and sends nothing).
pub trait QueueSerializer<T>: Send + Sync + 'static {
    /// The bytes of `item`.
    fn serialize(&self, item: &T) -> Result<Vec<u8>>;
    /// The item whose bytes are `bytes`; `path` is the item node, for the error.
    fn deserialize(&self, path: &str, bytes: &[u8]) -> Result<T>;
}

/// Items are raw bytes, as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerializer;

impl QueueSerializer<Vec<u8>> for BytesSerializer {
    fn serialize(&self, item: &Vec<u8>) -> Result<Vec<u8>> {
        Ok(item.clone())
    }
    fn deserialize(&self, _path: &str, bytes: &[u8]) -> Result<Vec<u8>> {
        Ok(bytes.to_vec())
    }
}

/// Items are text, as UTF-8 (what Curator's tests do with `String.getBytes()`); bytes that are
/// not UTF-8 are [`CuratorError::BadData`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSerializer;

impl QueueSerializer<String> for StringSerializer {
    fn serialize(&self, item: &String) -> Result<Vec<u8>> {
        Ok(item.as_bytes().to_vec())
    }
    fn deserialize(&self, path: &str, bytes: &[u8]) -> Result<String> {
        String::from_utf8(bytes.to_vec())
            .map_err(|e| CuratorError::BadData { path: path.to_string(), reason: format!("item is not UTF-8: {e}") })
    }
}
