//! The schemas of a framework and the one check every write and watching read makes against
//! them before it is sent, [`check_against`] (Curator's `SchemaSet`; docs/architecture.md
//! section 18).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{CuratorError, Result};
use crate::framework::CuratorFramework;
use crate::ops::CreateMode;
use crate::schema::Schema;

/// The name of the schema used where no schema of a set matches (with
/// [`use_default_schema`](SchemaSet::new)): it allows everything.
pub const DEFAULT_SCHEMA_NAME: &str = "__default__";

/// The schemas a framework checks its operations against (give it with
/// [`CuratorFrameworkBuilder::schema_set`](crate::CuratorFrameworkBuilder::schema_set)).
/// Curator's `SchemaSet`.
///
/// The schema of a path is, as in Curator: the schema of exactly that path if there is one;
/// otherwise the first schema, in the order given, whose pattern matches it; otherwise the
/// default schema (which allows everything) if the set uses one, or else the operation is
/// refused ("no schema").
///
/// Checked: every create, data write and delete, the fluent operations' (transactions
/// included) and those recipes send on a [`Session`](crate::Session) (its
/// [`create`](crate::Session::create), [`set_data`](crate::Session::set_data),
/// [`delete`](crate::Session::delete) and [`multi`](crate::Session::multi)), and the fluent reads
/// that can set a watch; not checked: the parents a create makes, ACLs, and reads on a session's
/// raw client.
///
/// Paths are the ones callers give, relative to the framework's namespace: the schemas of a
/// namespaced framework are written without it. Curator checks creates, deletes, data writes
/// and transactions so too (its reads check the namespaced path; here every operation checks
/// the same path).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = curator_test::TestingServer::start().await?;
/// use curator_core::{Allowance, CreateMode, CuratorError, CuratorFramework, Schema, SchemaSet};
///
/// let locks = Schema::builder_for_path("/config").name("config").can_be_deleted(false).build()?;
/// let set = SchemaSet::new(vec![locks], true)?;
/// let fw = CuratorFramework::builder().connect_string(server.connect_string()).schema_set(set).build()?;
/// fw.start()?;
/// fw.create().for_path("/config", b"v1".to_vec()).await?;
/// let refused = fw.delete().for_path("/config").await;
/// assert!(matches!(refused, Err(CuratorError::SchemaViolation { ref schema, .. }) if schema == "config"));
/// assert!(fw.check_exists().for_path("/config").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SchemaSet {
    schemas: Vec<Arc<Schema>>,
    by_path: HashMap<String, Arc<Schema>>,
    by_name: HashMap<String, Arc<Schema>>,
    patterns: Vec<Arc<Schema>>,
    default: Option<Arc<Schema>>,
}

impl SchemaSet {
    /// A set of `schemas`, looked up in the order given; with `use_default_schema`, a path no
    /// schema matches gets the default schema (everything allowed), otherwise its operations
    /// are refused. Two schemas of one name, or two of one exact path, are an
    /// [`InvalidArgument`](CuratorError::InvalidArgument).
    pub fn new(schemas: Vec<Schema>, use_default_schema: bool) -> Result<SchemaSet> {
        let mut set = SchemaSet {
            schemas: Vec::with_capacity(schemas.len()),
            by_path: HashMap::new(),
            by_name: HashMap::new(),
            patterns: Vec::new(),
            default: use_default_schema.then(|| Arc::new(Self::default_schema())),
        };
        for schema in schemas {
            let schema = Arc::new(schema);
            let duplicate = |what: &str| CuratorError::InvalidArgument {
                path: schema.raw_path().to_string(),
                reason: format!("two schemas of one {what} in a schema set ({:?})", schema.name()),
            };
            if set.by_name.insert(schema.name().to_string(), schema.clone()).is_some() {
                return Err(duplicate("name"));
            }
            match schema.path() {
                Some(path) => {
                    if set.by_path.insert(path.to_string(), schema.clone()).is_some() {
                        return Err(duplicate("path"));
                    }
                }
                None => set.patterns.push(schema.clone()),
            }
            set.schemas.push(schema);
        }
        Ok(set)
    }

    /// A set with no schemas that allows everything (Curator's `getDefaultSchemaSet`): what a
    /// framework without a schema set behaves as.
    pub fn default_schema_set() -> SchemaSet {
        SchemaSet {
            schemas: Vec::new(),
            by_path: HashMap::new(),
            by_name: HashMap::new(),
            patterns: Vec::new(),
            default: Some(Arc::new(Self::default_schema())),
        }
    }

    fn default_schema() -> Schema {
        Schema::allow_all(DEFAULT_SCHEMA_NAME, "Default schema")
    }

    /// The schemas, in the order given.
    pub fn schemas(&self) -> impl Iterator<Item = &Schema> {
        self.schemas.iter().map(|s| &**s)
    }

    /// The schema named `name`.
    pub fn named_schema(&self, name: &str) -> Option<&Schema> {
        self.by_name.get(name).map(|s| &**s)
    }

    /// True if a path no schema matches gets the default schema.
    pub fn uses_default_schema(&self) -> bool {
        self.default.is_some()
    }

    /// The schema of `path` (see [`SchemaSet`] for the order), or a
    /// [`SchemaViolation`](CuratorError::SchemaViolation) with an empty `schema` if none
    /// matches and the set has no default schema.
    pub fn schema_for(&self, path: &str) -> Result<&Schema> {
        let found = self.by_path.get(path).or_else(|| self.patterns.iter().find(|s| s.matches(path)));
        match found.or(self.default.as_ref()) {
            Some(schema) => Ok(schema),
            None => Err(CuratorError::SchemaViolation {
                path: path.to_string(),
                schema: String::new(),
                reason: "no schema matches the path".into(),
            }),
        }
    }

    /// A description of every schema for people (see [`Schema::to_documentation`]).
    pub fn to_documentation(&self) -> String {
        let mut doc = String::from("Curator Schemas:\n\n");
        for schema in &self.schemas {
            doc.push_str(&schema.to_documentation());
            doc.push('\n');
        }
        doc
    }

    /// Checks `op` on `path` against the schema of the path.
    pub(crate) fn check(&self, path: &str, op: SchemaOp<'_>) -> Result<()> {
        let schema = self.schema_for(path)?;
        match op {
            SchemaOp::Create(mode, data) => schema.validate_create(path, mode, data),
            SchemaOp::SetData(data) => schema.validate_data(path, data),
            SchemaOp::Delete => schema.validate_delete(path),
            SchemaOp::Watch(watching) => schema.validate_watch(path, watching),
        }
    }
}

impl std::fmt::Debug for SchemaSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaSet")
            .field("schemas", &self.schemas)
            .field("use_default_schema", &self.default.is_some())
            .finish()
    }
}

/// An operation as a schema sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SchemaOp<'a> {
    /// A create in this mode with this data (as sent: compressed if asked).
    Create(CreateMode, &'a [u8]),
    /// A data write.
    SetData(&'a [u8]),
    /// A delete.
    Delete,
    /// A read that sets a watch (true) or not; a persistent watch is `Watch(true)`.
    Watch(bool),
}

impl CuratorFramework {
    /// The framework's schema set, if it was built with one.
    pub fn schema_set(&self) -> Option<&SchemaSet> {
        self.config().schema_set.as_deref()
    }

    /// The schema check of the fluent operations, made where each checks the rest of its
    /// input, before anything is sent: [`check_against`] the framework's set.
    pub(crate) fn check_schema(&self, path: &str, op: SchemaOp<'_>) -> Result<()> {
        check_against(self.schema_set(), path, op)
    }
}

/// The one schema check of every operation, the fluent builders' and the writes recipes send on
/// a [`Session`](crate::Session) (`session_writes.rs`) alike: nothing without a schema set, else
/// [`SchemaSet::check`] on the path as the caller gave it (relative to the namespace).
pub(crate) fn check_against(set: Option<&SchemaSet>, path: &str, op: SchemaOp<'_>) -> Result<()> {
    let Some(set) = set else { return Ok(()) };
    set.check(path, op).inspect_err(|err| {
        tracing::debug!(path = %crate::error::ShortPath(path), op = ?op, error = %err, "schema violation: not sent");
    })
}
