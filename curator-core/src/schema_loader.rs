//! Schemas from Curator's JSON schema format (Curator's `SchemaSetLoader`; docs/architecture.md
//! section 18). The JSON is read as a `serde_json::Value`, field by field, as Curator reads it
//! with Jackson's tree.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::error::{CuratorError, Result};
use crate::schema::{Allowance, DataValidator, Schema};
use crate::schema_set::SchemaSet;

/// Schemas read from Curator's JSON schema format: an array of objects, each with
///
/// - `"name"` (required): the schema's name;
/// - `"path"` (required): an exact path, or a pattern if `"isRegex"` is true;
/// - `"isRegex"`: false by default;
/// - `"schemaValidator"`: the name of a data validator, looked up in the map given to
///   [`from_json`](Self::from_json) (Curator's `SchemaValidatorMapper`);
/// - `"documentation"`: "" by default;
/// - `"ephemeral"`, `"sequential"`, `"watched"`: `"can"`, `"must"` or `"cannot"` (any case),
///   `"can"` by default;
/// - `"canBeDeleted"`: **false** by default, as Curator's loader reads it (its documentation
///   says true; a file shared with Java applications means the same here as there);
/// - `"metadata"`: an object whose values are kept as text (numbers and booleans as written).
///
/// Anything else is an [`InvalidArgument`](CuratorError::InvalidArgument) saying what and
/// where: JSON that does not parse, a missing name or path, an unknown allowance or validator,
/// a pattern that does not compile. Unknown fields are ignored, as in Curator.
///
/// ```
/// use std::collections::HashMap;
/// use curator_core::{Allowance, DataValidator, SchemaSetLoader};
///
/// let json = r#"[{"name": "test", "path": "/a/.*", "isRegex": true, "ephemeral": "must",
///                 "schemaValidator": "non-empty", "metadata": {"owner": "ops"}}]"#;
/// let mut validators: HashMap<String, DataValidator> = HashMap::new();
/// validators.insert("non-empty".into(), std::sync::Arc::new(|_: &str, data: &[u8]| {
///     if data.is_empty() { Err("empty".to_string()) } else { Ok(()) }
/// }));
/// let loader = SchemaSetLoader::from_json(json, &validators)?;
/// assert_eq!(loader.schemas()[0].ephemeral(), Allowance::Must);
/// assert!(!loader.schemas()[0].can_be_deleted());
/// let set = loader.into_schema_set(true)?;
/// assert_eq!(set.schema_for("/a/b")?.name(), "test");
/// # Ok::<(), curator_core::CuratorError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SchemaSetLoader {
    schemas: Vec<Schema>,
}

/// An [`InvalidArgument`](CuratorError::InvalidArgument) about the schema JSON.
fn bad(reason: String) -> CuratorError {
    CuratorError::InvalidArgument { path: String::new(), reason: format!("schema JSON: {reason}") }
}

impl SchemaSetLoader {
    /// Reads `json`; `validators` resolves the `"schemaValidator"` names (pass an empty map
    /// when the JSON names none).
    pub fn from_json(json: &str, validators: &HashMap<String, DataValidator>) -> Result<SchemaSetLoader> {
        let root: Value = serde_json::from_str(json).map_err(|e| bad(format!("does not parse: {e}")))?;
        Self::from_value(&root, validators)
    }

    /// As [`from_json`](Self::from_json), from JSON already parsed. (Not public: serde_json's
    /// types stay out of the API.)
    fn from_value(root: &Value, validators: &HashMap<String, DataValidator>) -> Result<SchemaSetLoader> {
        let Value::Array(items) = root else {
            return Err(bad("the top level must be an array of schemas".into()));
        };
        let schemas =
            items.iter().enumerate().map(|(i, item)| read_schema(i, item, validators)).collect::<Result<_>>()?;
        Ok(SchemaSetLoader { schemas })
    }

    /// The schemas read, in the order of the JSON.
    pub fn schemas(&self) -> &[Schema] {
        &self.schemas
    }

    /// A [`SchemaSet`] of the schemas read (see [`SchemaSet::new`] for `use_default_schema`).
    pub fn into_schema_set(self, use_default_schema: bool) -> Result<SchemaSet> {
        SchemaSet::new(self.schemas, use_default_schema)
    }
}

/// Jackson's `asText` of a scalar: strings as they are, numbers and booleans as written;
/// `null` as "null", arrays and objects as "".
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Array(_) | Value::Object(_) => String::new(),
    }
}

/// Jackson's `asBoolean`: true for `true`, the text "true" and non-zero numbers.
fn as_bool(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.trim() == "true",
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

fn read_schema(index: usize, item: &Value, validators: &HashMap<String, DataValidator>) -> Result<Schema> {
    let Value::Object(fields) = item else {
        return Err(bad(format!("schema {index} is not an object")));
    };
    let text = |key: &str| fields.get(key).map(as_text);
    let name = text("name").ok_or_else(|| bad(format!("schema {index} has no \"name\"")))?;
    let at = |reason: String| bad(format!("schema {name:?}: {reason}"));
    let path = text("path").ok_or_else(|| at("no \"path\"".into()))?;
    let mut builder = if as_bool(fields.get("isRegex")) {
        Schema::builder_for_pattern(&path)
    } else {
        Schema::builder_for_path(&path)
    };
    if let Some(validator) = text("schemaValidator") {
        let found = validators.get(&validator).ok_or_else(|| at(format!("no data validator named {validator:?}")))?;
        builder = builder.shared_data_validator(found.clone());
    }
    let allowance = |key: &str| match fields.get(key) {
        None => Ok(Allowance::Can),
        Some(value) => Allowance::from_name(&as_text(value))
            .ok_or_else(|| at(format!("\"{key}\" must be one of \"can\", \"must\", \"cannot\", not {value}"))),
    };
    let metadata: BTreeMap<String, String> = match fields.get("metadata") {
        None => BTreeMap::new(),
        Some(Value::Object(meta)) => meta.iter().map(|(k, v)| (k.clone(), as_text(v))).collect(),
        Some(other) => return Err(at(format!("\"metadata\" must be an object, not {other}"))),
    };
    builder
        .name(name.clone())
        .documentation(text("documentation").unwrap_or_default())
        .ephemeral(allowance("ephemeral")?)
        .sequential(allowance("sequential")?)
        .watched(allowance("watched")?)
        .can_be_deleted(as_bool(fields.get("canBeDeleted")))
        .metadata(metadata)
        .build()
        .map_err(|e| at(e.to_string()))
}
