//! [`ModelSpec`]: where a model lives and how it is written (Curator's `ModelSpec`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use curator_core::zk::Acl;
use curator_core::{Allowance, CreateMode, CuratorError, Result, Schema, ZPath};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::serializer::{JsonModelSerializer, ModelSerializer};

/// An option of the creates a modeled client makes (Curator's x-async `CreateOption`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreateOption {
    /// Missing parents are made, as persistent nodes.
    CreateParentsIfNeeded,
    /// Missing parents are made, as containers (the server removes them once empty).
    CreateParentsAsContainers,
    /// `set` on an existing node writes its data instead of failing with `NodeExists`.
    SetDataIfExists,
    /// The data is compressed (and reads decompress it).
    Compress,
}

/// An option of the deletes a modeled client makes (Curator's x-async `DeleteOption`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeleteOption {
    /// A missing node is not an error.
    Quietly,
    /// The delete is retried in the background until it succeeds (core's guaranteed delete).
    Guaranteed,
    /// The node's children are deleted first.
    DeletingChildrenIfNeeded,
}

/// Where a model lives and how it is written: its [`ZPath`] (parameters are resolved with
/// [`ModeledFramework::resolved`](crate::ModeledFramework::resolved) or `child`), its
/// [`ModelSerializer`], and the create mode, ACL, TTL and create and delete options of its
/// writes. Cheap to clone.
///
/// The default options are Curator's: [`CreateOption::CreateParentsAsContainers`] and
/// [`CreateOption::SetDataIfExists`] (so that `set` writes whether or not the node exists and
/// makes its parents), and [`DeleteOption::Guaranteed`];
/// [`ModelSpecBuilder::with_create_options`] and [`ModelSpecBuilder::with_delete_options`]
/// replace them.
///
/// ```
/// use curator_core::{CreateMode, ZPath};
/// use curator_modeled::ModelSpec;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Config { limit: u32 }
///
/// let spec = ModelSpec::<Config>::json(ZPath::parse_with_ids("/config/{service}")?)
///     .with_create_mode(CreateMode::Persistent)
///     .build()?;
/// assert_eq!(spec.path().to_string(), "/config/{service}");
/// # Ok::<(), curator_core::CuratorError>(())
/// ```
pub struct ModelSpec<T> {
    path: ZPath,
    serializer: Arc<dyn ModelSerializer<T>>,
    mode: CreateMode,
    acl: Option<Vec<Acl>>,
    ttl: Option<Duration>,
    create_options: Vec<CreateOption>,
    delete_options: Vec<DeleteOption>,
}

impl<T> Clone for ModelSpec<T> {
    fn clone(&self) -> Self {
        ModelSpec {
            path: self.path.clone(),
            serializer: self.serializer.clone(),
            mode: self.mode,
            acl: self.acl.clone(),
            ttl: self.ttl,
            create_options: self.create_options.clone(),
            delete_options: self.delete_options.clone(),
        }
    }
}

impl<T> fmt::Debug for ModelSpec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelSpec")
            .field("path", &self.path.to_string())
            .field("mode", &self.mode)
            .field("acl", &self.acl)
            .field("ttl", &self.ttl)
            .field("create_options", &self.create_options)
            .field("delete_options", &self.delete_options)
            .finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned + 'static> ModelSpec<T> {
    /// A builder for models at `path` in serde JSON ([`JsonModelSerializer`]).
    pub fn json(path: ZPath) -> ModelSpecBuilder<T> {
        ModelSpec::builder(path, JsonModelSerializer::new())
    }
}

impl<T> ModelSpec<T> {
    /// A builder for models at `path` written by `serializer`.
    pub fn builder(path: ZPath, serializer: impl ModelSerializer<T>) -> ModelSpecBuilder<T> {
        ModelSpecBuilder {
            spec: ModelSpec {
                path,
                serializer: Arc::new(serializer),
                mode: CreateMode::Persistent,
                acl: None,
                ttl: None,
                create_options: vec![CreateOption::CreateParentsAsContainers, CreateOption::SetDataIfExists],
                delete_options: vec![DeleteOption::Guaranteed],
            },
        }
    }

    /// The path (maybe with parameters).
    pub fn path(&self) -> &ZPath {
        &self.path
    }
    /// The serializer.
    pub fn serializer(&self) -> &Arc<dyn ModelSerializer<T>> {
        &self.serializer
    }
    /// The create mode of creates.
    pub fn create_mode(&self) -> CreateMode {
        self.mode
    }
    /// The ACL of creates (`None`: the framework's ACL provider decides).
    pub fn acl(&self) -> Option<&[Acl]> {
        self.acl.as_deref()
    }
    /// The TTL of creates in a TTL mode.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl
    }
    /// The create options.
    pub fn create_options(&self) -> &[CreateOption] {
        &self.create_options
    }
    /// The delete options.
    pub fn delete_options(&self) -> &[DeleteOption] {
        &self.delete_options
    }
    /// Whether the creates have `option`.
    pub fn has_create_option(&self, option: CreateOption) -> bool {
        self.create_options.contains(&option)
    }
    /// Whether the deletes have `option`.
    pub fn has_delete_option(&self, option: DeleteOption) -> bool {
        self.delete_options.contains(&option)
    }

    /// This spec at another path (Curator's `withPath`).
    pub fn with_path(&self, path: ZPath) -> ModelSpec<T> {
        ModelSpec { path, ..self.clone() }
    }

    /// The [`Schema`] of the nodes this spec writes (Curator's `ModelSpec.schema()`): every path
    /// of the spec's [`ZPath`] (a parameter matches any one node name), ephemeral and
    /// sequential exactly as the create mode says, deletable, watched or not, and data that
    /// must deserialize as the model: the "must deserialize as `T`" validator. Give it to a
    /// framework's [`SchemaSet`](curator_core::SchemaSet) so that no one writes data the
    /// model cannot read.
    pub fn schema(&self) -> Result<Schema>
    where
        T: 'static,
    {
        let must = |yes: bool| if yes { Allowance::Must } else { Allowance::Cannot };
        let serializer = self.serializer.clone();
        Schema::builder_for_zpath(&self.path)
            .name(self.path.to_string())
            .ephemeral(must(self.mode.is_ephemeral()))
            .sequential(must(self.mode.is_sequential()))
            .watched(Allowance::Can)
            .can_be_deleted(true)
            .data_validator(move |_path, data| {
                serializer.deserialize(data).map(drop).map_err(|e| format!("data cannot be read as the model: {e}"))
            })
            .build()
    }
}

/// Builder of a [`ModelSpec`]; see [`ModelSpec::json`] and [`ModelSpec::builder`].
pub struct ModelSpecBuilder<T> {
    spec: ModelSpec<T>,
}

impl<T> fmt::Debug for ModelSpecBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ModelSpecBuilder").field(&self.spec).finish()
    }
}

impl<T> ModelSpecBuilder<T> {
    /// The create mode of creates (default [`CreateMode::Persistent`]).
    pub fn with_create_mode(mut self, mode: CreateMode) -> Self {
        self.spec.mode = mode;
        self
    }
    /// The ACL of creates (default: the framework's ACL provider's).
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.spec.acl = Some(acl);
        self
    }
    /// The TTL of creates; the create mode must be a TTL one
    /// ([`CreateMode::PersistentWithTtl`] or [`CreateMode::PersistentSequentialWithTtl`]).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.spec.ttl = Some(ttl);
        self
    }
    /// The create options (replacing the defaults).
    pub fn with_create_options(mut self, options: impl IntoIterator<Item = CreateOption>) -> Self {
        self.spec.create_options = options.into_iter().collect();
        self
    }
    /// The delete options (replacing the default, [`DeleteOption::Guaranteed`]).
    pub fn with_delete_options(mut self, options: impl IntoIterator<Item = DeleteOption>) -> Self {
        self.spec.delete_options = options.into_iter().collect();
        self
    }

    /// The spec. A TTL without a TTL mode, a TTL mode without a TTL, an empty ACL, or a path
    /// with a literal node written as a parameter is [`CuratorError::InvalidArgument`]: a path
    /// from [`ZPath::parse`] keeps `{id}` as a node named `{id}`, which is almost always a
    /// parameter meant ([`ZPath::parse_with_ids`]), and would otherwise be written silently.
    pub fn build(self) -> Result<ModelSpec<T>> {
        let spec = self.spec;
        let bad = |reason: &str| CuratorError::InvalidArgument { path: spec.path.to_string(), reason: reason.into() };
        if let Some(literal) = spec.path.literal_ids().next() {
            return Err(bad(&format!(
                "node {literal} is a literal name, not a parameter (ZPath::parse makes none): \
                 build the path with ZPath::parse_with_ids to make it a parameter"
            )));
        }
        if spec.ttl.is_some() != spec.mode.is_ttl() {
            return Err(bad("a TTL needs a TTL create mode, and a TTL create mode a TTL"));
        }
        if spec.acl.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad("an empty ACL"));
        }
        Ok(spec)
    }
}
