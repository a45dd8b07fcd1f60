//! How a model becomes node data and back: [`ModelSerializer`], with serde JSON
//! ([`JsonModelSerializer`], the default) and the bytes as they are ([`RawModelSerializer`]).

use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Turns a model into node data and node data back into a model (Curator's `ModelSerializer`).
///
/// Errors are the reason as text; the modeled client adds the node's path and reports them as
/// [`CuratorError::InvalidArgument`](curator_core::CuratorError::InvalidArgument) (a model that
/// does not serialize: nothing is sent) or [`CuratorError::BadData`](curator_core::CuratorError::BadData)
/// (node data that does not deserialize).
pub trait ModelSerializer<T>: Send + Sync + 'static {
    /// The node data of `model`.
    fn serialize(&self, model: &T) -> Result<Vec<u8>, String>;
    /// The model in node data `bytes`.
    fn deserialize(&self, bytes: &[u8]) -> Result<T, String>;
}

/// serde JSON, byte for byte what Curator's `JacksonModelSerializer` writes for a class with the
/// same fields in the same order: compact JSON, the fields in declaration order, a `None` as
/// `null` (unless the struct says `#[serde(skip_serializing_if = ...)]`), and on reading,
/// fields the struct does not know are ignored (as Curator's mapper does, so that an older
/// model reads a newer one's data). The two differ on floating-point numbers' text (Jackson
/// writes `1.0E10` where serde writes `10000000000.0`; each reads the other's) and on the hex
/// digits' case of escaped control characters.
pub struct JsonModelSerializer<T>(PhantomData<fn() -> T>);

impl<T> JsonModelSerializer<T> {
    /// The serializer.
    pub fn new() -> Self {
        JsonModelSerializer(PhantomData)
    }
}

impl<T> Default for JsonModelSerializer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for JsonModelSerializer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JsonModelSerializer")
    }
}

impl<T: Serialize + DeserializeOwned + 'static> ModelSerializer<T> for JsonModelSerializer<T> {
    fn serialize(&self, model: &T) -> Result<Vec<u8>, String> {
        serde_json::to_vec(model).map_err(|e| format!("not serializable as JSON: {e}"))
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<T, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not the model's JSON: {e}"))
    }
}

/// The node data as it is: the model is the bytes (Curator's `ModelSerializer.raw`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawModelSerializer;

impl ModelSerializer<Vec<u8>> for RawModelSerializer {
    fn serialize(&self, model: &Vec<u8>) -> Result<Vec<u8>, String> {
        Ok(model.clone())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        Ok(bytes.to_vec())
    }
}
