//! One schema: what may be done at the paths it covers (Curator's `Schema` and
//! `SchemaBuilder`; docs/architecture.md section 18).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{CuratorError, Result};
use crate::ops::CreateMode;
use crate::zpath::ZPath;

/// Whether a schema allows, requires or forbids a property of a node (ephemeral, sequential,
/// watched). Curator's `Schema.Allowance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Allowance {
    /// Either way.
    #[default]
    Can,
    /// Required.
    Must,
    /// Forbidden.
    Cannot,
}

impl Allowance {
    /// `Ok` if `has` (whether the operation has the property) fits; otherwise the reason
    /// ("must be ephemeral", "cannot be watched", ...).
    fn check(self, has: bool, what: &str) -> std::result::Result<(), String> {
        match (self, has) {
            (Allowance::Must, false) => Err(format!("must be {what}")),
            (Allowance::Cannot, true) => Err(format!("cannot be {what}")),
            _ => Ok(()),
        }
    }

    /// The name in Curator's JSON schema format (`"can"`, `"must"`, `"cannot"`), any case.
    pub fn from_name(name: &str) -> Option<Allowance> {
        match name.to_ascii_uppercase().as_str() {
            "CAN" => Some(Allowance::Can),
            "MUST" => Some(Allowance::Must),
            "CANNOT" => Some(Allowance::Cannot),
            _ => None,
        }
    }
}

/// A check of the data written to a node (by a create, a data write, or either in a
/// transaction): called with the path as the caller gave it (relative to the namespace) and the
/// data as it will be sent (compressed, if asked); `Err(reason)` refuses the write. Curator's
/// `SchemaValidator` (data only: ACL changes are not checked, see [`Schema`]).
pub type DataValidator = Arc<dyn Fn(&str, &[u8]) -> std::result::Result<(), String> + Send + Sync>;

/// Which paths a schema covers.
#[derive(Clone)]
enum Target {
    /// This one path.
    Exact(String),
    /// Every path the whole pattern matches; the pattern as given, and compiled anchored.
    Pattern(String, regex_lite::Regex),
    /// Every path (the default schema's `.*`, needing no compiled pattern).
    Any,
}

/// What may be done at a path, or at every path a pattern matches: whether a node there may
/// (or must) be ephemeral or sequential, watched, deleted, and what data it may hold.
/// Curator's `Schema`. A [`SchemaSet`](crate::SchemaSet) given to the framework with
/// [`schema_set`](crate::CuratorFrameworkBuilder::schema_set) refuses operations that break it
/// with [`CuratorError::SchemaViolation`] before sending anything.
///
/// As in Curator: a create is checked for its mode and data (its parents, made by
/// `creating_parents_if_needed`, are not checked); a data write for its data; a delete against
/// [`can_be_deleted`](Self::can_be_deleted); a read (`check_exists`, `get_data`, `get_children`)
/// for whether it sets a watch, so that a schema whose nodes *must* be watched refuses a read
/// without one. Unlike Curator, a persistent watch (`watches().add()`) is checked as a watch
/// too, and an ACL change is not checked (the data validator sees data only).
///
/// ```
/// use curator_core::{Allowance, CreateMode, Schema};
///
/// let schema = Schema::builder_for_pattern("/workers/.*")
///     .name("workers")
///     .ephemeral(Allowance::Must)
///     .data_validator(|_path, data| if data.is_empty() { Err("no address".into()) } else { Ok(()) })
///     .build()?;
/// assert!(schema.matches("/workers/w1"));
/// assert!(schema.validate_create("/workers/w1", CreateMode::Ephemeral, b"10.0.0.1").is_ok());
/// assert!(schema.validate_create("/workers/w1", CreateMode::Persistent, b"10.0.0.1").is_err());
/// assert!(schema.validate_create("/workers/w1", CreateMode::Ephemeral, b"").is_err());
/// # Ok::<(), curator_core::CuratorError>(())
/// ```
#[derive(Clone)]
pub struct Schema {
    name: String,
    target: Target,
    documentation: String,
    validator: Option<DataValidator>,
    ephemeral: Allowance,
    sequential: Allowance,
    watched: Allowance,
    can_be_deleted: bool,
    metadata: BTreeMap<String, String>,
}

/// Builder of a [`Schema`]: start it with [`Schema::builder_for_path`] or
/// [`Schema::builder_for_pattern`]. Everything is allowed unless set otherwise.
#[derive(Clone)]
#[must_use = "a schema builder does nothing until built"]
pub struct SchemaBuilder {
    schema: std::result::Result<Schema, CuratorError>,
}

impl Schema {
    /// A schema for exactly `path` (a trailing `/` is dropped, as Curator does). In a set,
    /// exact paths are looked up before any pattern.
    pub fn builder_for_path(path: &str) -> SchemaBuilder {
        let path = match path.strip_suffix('/') {
            Some(stripped) if !stripped.is_empty() => stripped.to_string(),
            _ => path.to_string(),
        };
        SchemaBuilder { schema: Ok(Schema::new(Target::Exact(path))) }
    }

    /// A schema for every path the regular expression `pattern` matches whole (as Java's
    /// `Pattern.matches`; the syntax is the `regex-lite` crate's). A pattern that does not
    /// compile makes [`SchemaBuilder::build`] fail with
    /// [`InvalidArgument`](CuratorError::InvalidArgument).
    pub fn builder_for_pattern(pattern: &str) -> SchemaBuilder {
        let schema = regex_lite::Regex::new(&format!("^(?:{pattern})$"))
            .map(|re| Schema::new(Target::Pattern(pattern.to_string(), re)))
            .map_err(|e| CuratorError::InvalidArgument {
                path: pattern.to_string(),
                reason: format!("schema pattern does not compile: {e}"),
            });
        SchemaBuilder { schema }
    }

    /// A schema for every concrete path of `path` (a model's paths): its fixed nodes as
    /// written, each parameter any one node name. The pattern is Curator's
    /// `ZPath.toSchemaPathPattern` with the fixed nodes quoted, so a node name holding `.` or
    /// `+` matches only itself.
    pub fn builder_for_zpath(path: &ZPath) -> SchemaBuilder {
        Self::builder_for_pattern(&path.schema_regex(regex_lite::escape, "[^/]+"))
    }

    /// A schema for the parent node of a typical recipe (Curator's `builderForRecipeParent`):
    /// exactly `parent`, neither sequential nor ephemeral.
    pub fn builder_for_recipe_parent(parent: &str) -> SchemaBuilder {
        Self::builder_for_path(parent).sequential(Allowance::Cannot).ephemeral(Allowance::Cannot)
    }

    /// A schema for the children of a typical recipe (Curator's `builderForRecipe`): every
    /// path below `parent`, which must be ephemeral, sequential and watched, and may be
    /// deleted.
    pub fn builder_for_recipe(parent: &str) -> SchemaBuilder {
        let parent = regex_lite::escape(parent.trim_end_matches('/'));
        Self::builder_for_pattern(&format!("{parent}/.*"))
            .sequential(Allowance::Must)
            .ephemeral(Allowance::Must)
            .watched(Allowance::Must)
            .can_be_deleted(true)
    }

    /// The schema that allows everything everywhere (a set's default schema).
    pub(crate) fn allow_all(name: &str, documentation: &str) -> Self {
        Schema { name: name.into(), documentation: documentation.into(), ..Schema::new(Target::Any) }
    }

    fn new(target: Target) -> Self {
        Schema {
            name: uuid::Uuid::new_v4().to_string(),
            target,
            documentation: String::new(),
            validator: None,
            ephemeral: Allowance::Can,
            sequential: Allowance::Can,
            watched: Allowance::Can,
            can_be_deleted: true,
            metadata: BTreeMap::new(),
        }
    }

    /// The schema's name (a random UUID unless named): unique in a set.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exact path, or the pattern as given (Curator's `getRawPath`).
    pub fn raw_path(&self) -> &str {
        match &self.target {
            Target::Exact(path) | Target::Pattern(path, _) => path,
            Target::Any => ".*",
        }
    }

    /// The exact path, for a schema of one path.
    pub fn path(&self) -> Option<&str> {
        match &self.target {
            Target::Exact(path) => Some(path),
            Target::Pattern(..) | Target::Any => None,
        }
    }

    /// The pattern as given, for a schema of a pattern.
    pub fn pattern(&self) -> Option<&str> {
        match &self.target {
            Target::Exact(_) => None,
            Target::Pattern(pattern, _) => Some(pattern),
            Target::Any => Some(".*"),
        }
    }

    /// True if the schema covers `path`: it is the exact path, or the pattern matches all of it.
    pub fn matches(&self, path: &str) -> bool {
        match &self.target {
            Target::Exact(exact) => exact == path,
            Target::Pattern(_, re) => re.is_match(path),
            Target::Any => true,
        }
    }

    /// The documentation given to the builder ("" by default).
    pub fn documentation(&self) -> &str {
        &self.documentation
    }

    /// Whether nodes here may, must or cannot be ephemeral.
    pub fn ephemeral(&self) -> Allowance {
        self.ephemeral
    }

    /// Whether nodes here may, must or cannot be sequential.
    pub fn sequential(&self) -> Allowance {
        self.sequential
    }

    /// Whether reads here may, must or cannot set a watch.
    pub fn watched(&self) -> Allowance {
        self.watched
    }

    /// Whether nodes here may be deleted.
    pub fn can_be_deleted(&self) -> bool {
        self.can_be_deleted
    }

    /// The metadata given to the builder: anything the application wants to keep with it.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// True if the schema has a data validator.
    pub fn has_data_validator(&self) -> bool {
        self.validator.is_some()
    }

    /// The [`SchemaViolation`](CuratorError::SchemaViolation) of this schema at `path`.
    fn violation(&self, path: &str, reason: String) -> CuratorError {
        CuratorError::SchemaViolation { path: path.to_string(), schema: self.name.clone(), reason }
    }

    /// Checks a create of `path` in `mode` with `data`: the ephemeral and sequential
    /// allowances, then the data validator.
    pub fn validate_create(&self, path: &str, mode: CreateMode, data: &[u8]) -> Result<()> {
        self.ephemeral
            .check(mode.is_ephemeral(), "ephemeral")
            .and_then(|()| self.sequential.check(mode.is_sequential(), "sequential"))
            .map_err(|reason| self.violation(path, reason))?;
        self.validate_data(path, data)
    }

    /// Checks data written to `path` with the data validator (Curator's `validateGeneral`).
    pub fn validate_data(&self, path: &str, data: &[u8]) -> Result<()> {
        match &self.validator {
            Some(validator) => {
                validator(path, data).map_err(|why| self.violation(path, format!("data is not valid: {why}")))
            }
            None => Ok(()),
        }
    }

    /// Checks a delete of `path`.
    pub fn validate_delete(&self, path: &str) -> Result<()> {
        if self.can_be_deleted {
            Ok(())
        } else {
            Err(self.violation(path, "cannot be deleted".into()))
        }
    }

    /// Checks a read of `path` that sets a watch (`watching`) or not.
    pub fn validate_watch(&self, path: &str, watching: bool) -> Result<()> {
        self.watched.check(watching, "watched").map_err(|reason| self.violation(path, reason))
    }

    /// A description for people: name, path or pattern, documentation, metadata and
    /// allowances, one per line.
    pub fn to_documentation(&self) -> String {
        let label = if self.pattern().is_some() { "Path Regex" } else { "Path" };
        format!(
            "Name: {}\n{label}: {}\nDoc: {}\nValidator: {}\nMeta: {:?}\nephemeral: {:?} | sequential: {:?} | watched: {:?} | canBeDeleted: {}\n",
            self.name,
            self.raw_path(),
            self.documentation,
            if self.validator.is_some() { "given" } else { "none" },
            self.metadata,
            self.ephemeral,
            self.sequential,
            self.watched,
            self.can_be_deleted
        )
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("name", &self.name)
            .field("path", &self.path())
            .field("pattern", &self.pattern())
            .field("documentation", &self.documentation)
            .field("data_validator", &self.validator.is_some())
            .field("ephemeral", &self.ephemeral)
            .field("sequential", &self.sequential)
            .field("watched", &self.watched)
            .field("can_be_deleted", &self.can_be_deleted)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl fmt::Debug for SchemaBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaBuilder").field("schema", &self.schema).finish()
    }
}

impl SchemaBuilder {
    fn set(mut self, f: impl FnOnce(&mut Schema)) -> Self {
        if let Ok(schema) = &mut self.schema {
            f(schema);
        }
        self
    }

    /// The schema's name, unique in its set (a random UUID by default).
    pub fn name(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.set(|s| s.name = name)
    }

    /// Documentation for people.
    pub fn documentation(self, documentation: impl Into<String>) -> Self {
        let documentation = documentation.into();
        self.set(|s| s.documentation = documentation)
    }

    /// Whether nodes here may, must or cannot be ephemeral.
    pub fn ephemeral(self, allowance: Allowance) -> Self {
        self.set(|s| s.ephemeral = allowance)
    }

    /// Whether nodes here may, must or cannot be sequential.
    pub fn sequential(self, allowance: Allowance) -> Self {
        self.set(|s| s.sequential = allowance)
    }

    /// Whether reads here may, must or cannot set a watch.
    pub fn watched(self, allowance: Allowance) -> Self {
        self.set(|s| s.watched = allowance)
    }

    /// Whether nodes here may be deleted (true by default).
    pub fn can_be_deleted(self, can: bool) -> Self {
        self.set(|s| s.can_be_deleted = can)
    }

    /// Metadata to keep with the schema.
    pub fn metadata(self, metadata: BTreeMap<String, String>) -> Self {
        self.set(|s| s.metadata = metadata)
    }

    /// The check of data written here (see [`DataValidator`]).
    pub fn data_validator(
        self,
        validator: impl Fn(&str, &[u8]) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.shared_data_validator(Arc::new(validator))
    }

    /// As [`data_validator`](Self::data_validator), with a validator shared with other schemas.
    pub fn shared_data_validator(self, validator: DataValidator) -> Self {
        self.set(|s| s.validator = Some(validator))
    }

    /// The schema; [`InvalidArgument`](CuratorError::InvalidArgument) if its pattern does not
    /// compile or its name is empty.
    pub fn build(self) -> Result<Schema> {
        let schema = self.schema?;
        if schema.name.is_empty() {
            return Err(CuratorError::InvalidArgument {
                path: schema.raw_path().to_string(),
                reason: "a schema's name cannot be empty".into(),
            });
        }
        Ok(schema)
    }
}
