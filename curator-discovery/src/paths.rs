//! Where a discovery's nodes are: the [`DiscoveryPathConstructor`] (Curator's, with
//! [`DefaultPathConstructor`] as its standard one), and [`Paths`], the one place every
//! discovery path is built and checked (docs/architecture.md, section 14.1): the discovery, its
//! registrations, its queries and its caches all go through it.

use std::sync::Arc;

use curator_core::path;

use crate::DiscoveryError;

/// Where a service discovery keeps its services and their instances (Curator's
/// `DiscoveryPathConstructor`): the names of the services are the children of
/// [`base_path`](Self::base_path), the instances of service `name` the children of
/// [`path_for_instances(name)`](Self::path_for_instances), each at
/// `path_for_instances(name)/<id>`.
///
/// [`DefaultPathConstructor`] is the standard layout, `base/<name>/<id>`, which
/// [`ServiceDiscovery::builder`](crate::ServiceDiscovery::builder)'s base path makes; give
/// another to
/// [`ServiceDiscoveryBuilder::path_constructor`](crate::ServiceDiscoveryBuilder::path_constructor)
/// for another layout. The discovery checks every path it is given: one that is not a valid
/// ZooKeeper path is a [`DiscoveryError::InvalidConstructedPath`], never a panic: at the
/// discovery's `build()` for its base path and the paths of a sample service and instance, and
/// whenever another name gives a bad path. The constructor is asked with names that are one node
/// name only (others are refused before).
///
/// ```
/// use curator_discovery::DiscoveryPathConstructor;
///
/// /// Instances under `/apps/<name>/instances`, names under `/apps`.
/// struct Nested;
/// impl DiscoveryPathConstructor for Nested {
///     fn base_path(&self) -> String {
///         "/apps".to_string()
///     }
///     fn path_for_instances(&self, name: &str) -> String {
///         format!("/apps/{name}/instances")
///     }
/// }
/// assert_eq!(Nested.path_for_instance("search", "1"), "/apps/search/instances/1");
/// ```
pub trait DiscoveryPathConstructor: Send + Sync {
    /// The node whose children are the names of the services (Curator's `getBasePath`).
    fn base_path(&self) -> String;

    /// The node whose children are the instances of service `name` (Curator's
    /// `getPathForInstances`).
    fn path_for_instances(&self, name: &str) -> String;

    /// The node of instance `id` of service `name` (Curator's `getPathForInstance`): `id` under
    /// [`path_for_instances`](Self::path_for_instances), which the caches rely on (a cache lists
    /// the children of `path_for_instances(name)` and takes each child's name as the id): the
    /// discovery refuses any other path with [`DiscoveryError::InvalidConstructedPath`].
    fn path_for_instance(&self, name: &str, id: &str) -> String {
        path::make_path(&self.path_for_instances(name), id)
    }
}

/// The standard layout (Curator's `DiscoveryPathConstructorImpl`): services under a base path,
/// instances at `base/<name>/<id>`.
///
/// ```
/// use curator_discovery::{DefaultPathConstructor, DiscoveryPathConstructor};
///
/// let paths = DefaultPathConstructor::new("/services")?;
/// assert_eq!(paths.path_for_instances("search"), "/services/search");
/// assert_eq!(paths.path_for_instance("search", "1"), "/services/search/1");
/// assert!(DefaultPathConstructor::new("services/").is_err());
/// # Ok::<(), curator_discovery::DiscoveryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultPathConstructor {
    base_path: String,
}

impl DefaultPathConstructor {
    /// The layout under `base_path`.
    ///
    /// # Errors
    /// [`DiscoveryError::Curator`] with `InvalidPath` when `base_path` is not a valid ZooKeeper
    /// path (empty, relative, ending in `/` ...), as Curator 5's constructor refuses it.
    pub fn new(base_path: &str) -> Result<Self, DiscoveryError> {
        path::validate(base_path)?;
        Ok(DefaultPathConstructor { base_path: base_path.to_string() })
    }
}

impl DiscoveryPathConstructor for DefaultPathConstructor {
    fn base_path(&self) -> String {
        self.base_path.clone()
    }

    fn path_for_instances(&self, name: &str) -> String {
        path::make_path(&self.base_path, name)
    }
}

/// The service name a constructor is asked for at build, to check what it gives.
const PROBE_NAME: &str = "service";
/// The instance id a constructor is asked for at build, with [`PROBE_NAME`].
const PROBE_ID: &str = "instance";

/// A discovery's [`DiscoveryPathConstructor`], checked: the only way the crate builds a
/// discovery path. Names and ids must be one node name; what the constructor returns must be a
/// valid path.
#[derive(Clone)]
pub(crate) struct Paths {
    constructor: Arc<dyn DiscoveryPathConstructor>,
    /// The constructor's base path, checked once at build.
    base: String,
}

impl Paths {
    /// Checks the constructor's base path, and asks it once for the paths of a sample service
    /// and instance ([`PROBE_NAME`], [`PROBE_ID`]), checked as every later answer is: a
    /// constructor that gives bad paths is refused here, at the discovery's build, rather than at
    /// its first registration or query. One whose paths are bad for some names only is still
    /// refused when such a name is asked.
    pub(crate) fn new(constructor: Arc<dyn DiscoveryPathConstructor>) -> Result<Self, DiscoveryError> {
        let base = checked(constructor.base_path())?;
        let paths = Paths { constructor, base };
        paths.instance(PROBE_NAME, PROBE_ID)?;
        Ok(paths)
    }

    /// The base path: the names of the services are its children.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The node whose children are the instances of service `name`.
    pub(crate) fn service(&self, name: &str) -> Result<String, DiscoveryError> {
        one_node_name(name)?;
        checked(self.constructor.path_for_instances(name))
    }

    /// The node of instance `id` of service `name`: it must be `id` under
    /// [`service`](Self::service)'s path, where the caches look for it.
    pub(crate) fn instance(&self, name: &str, id: &str) -> Result<String, DiscoveryError> {
        let parent = self.service(name)?;
        one_node_name(id)?;
        let path = checked(self.constructor.path_for_instance(name, id))?;
        if path::make_path(&parent, id) != path {
            return Err(DiscoveryError::InvalidConstructedPath {
                reason: format!("not {id:?} under the instances' path {parent:?}"),
                path,
            });
        }
        Ok(path)
    }
}

/// `path`, if it is a valid ZooKeeper path.
fn checked(path: String) -> Result<String, DiscoveryError> {
    match path::validate(&path) {
        Ok(()) => Ok(path),
        Err(e) => {
            tracing::warn!(%path, error = %e, "the discovery path constructor gave an invalid path");
            Err(DiscoveryError::InvalidConstructedPath { reason: e.to_string(), path })
        }
    }
}

/// Refuses a service name or instance id that is not one node name.
fn one_node_name(child: &str) -> Result<(), DiscoveryError> {
    if child.is_empty() || child.contains('/') || child == "." || child == ".." {
        return Err(DiscoveryError::InvalidInstance {
            id: child.to_string(),
            reason: format!("{child:?} is not one node name"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows Curator's DiscoveryPathConstructorImplTest.testCanonicalDiscoveryPathConstructor:
    /// a base path that is not a valid path is refused (a typed error where Curator throws
    /// `IllegalArgumentException`; Rust has no null).
    #[test]
    fn invalid_base_paths_are_refused() {
        for bad in ["", "foo/bar", "foo/bar/", "/foo/bar/"] {
            let made = DefaultPathConstructor::new(bad);
            assert!(
                matches!(made, Err(DiscoveryError::Curator(curator_core::CuratorError::InvalidPath { .. }))),
                "{bad:?}: {made:?}"
            );
        }
    }

    /// Follows DiscoveryPathConstructorImplTest.testGetBasePath.
    #[test]
    fn base_path() {
        assert_eq!(DefaultPathConstructor::new("/foo/bar").unwrap().base_path(), "/foo/bar");
        assert_eq!(DefaultPathConstructor::new("/").unwrap().base_path(), "/");
    }

    /// Follows DiscoveryPathConstructorImplTest.testGetPathForInstances (an empty name gives
    /// the base path, as `ZKPaths.makePath`; the discovery refuses empty names before asking).
    #[test]
    fn path_for_instances() {
        let c = DefaultPathConstructor::new("/foo/bar").unwrap();
        assert_eq!(c.path_for_instances("baz"), "/foo/bar/baz");
        assert_eq!(c.path_for_instances(""), "/foo/bar");
    }

    /// Follows DiscoveryPathConstructorImplTest.testGetPathForInstance.
    #[test]
    fn path_for_instance() {
        let c = DefaultPathConstructor::new("/foo").unwrap();
        assert_eq!(c.path_for_instance("bar", "baz"), "/foo/bar/baz");
        assert_eq!(c.path_for_instance("", "baz"), "/foo/baz");
        assert_eq!(c.path_for_instance("bar", ""), "/foo/bar");
        assert_eq!(c.path_for_instance("", ""), "/foo");
        let root = DefaultPathConstructor::new("/").unwrap();
        assert_eq!(root.path_for_instance("bar", "baz"), "/bar/baz");
    }

    /// The checked layer: names that are not one node name are refused before the constructor
    /// is asked, and what a constructor returns that is not a path is a typed error: at build
    /// for a constructor that is wrong for every name, when asked for one wrong for some.
    #[test]
    fn checked_paths() {
        struct Broken;
        impl DiscoveryPathConstructor for Broken {
            fn base_path(&self) -> String {
                "/ok".to_string()
            }
            fn path_for_instances(&self, name: &str) -> String {
                format!("relative/{name}")
            }
        }
        assert!(matches!(Paths::new(Arc::new(Broken)), Err(DiscoveryError::InvalidConstructedPath { .. })));
        struct BrokenForA;
        impl DiscoveryPathConstructor for BrokenForA {
            fn base_path(&self) -> String {
                "/ok".to_string()
            }
            fn path_for_instances(&self, name: &str) -> String {
                if name.starts_with('a') {
                    format!("relative/{name}")
                } else {
                    format!("/ok/{name}")
                }
            }
        }
        let paths = Paths::new(Arc::new(BrokenForA)).unwrap();
        assert_eq!(paths.base(), "/ok");
        assert!(
            matches!(paths.service("a"), Err(DiscoveryError::InvalidConstructedPath { ref path, .. }) if path == "relative/a")
        );
        assert!(matches!(paths.instance("a", "1"), Err(DiscoveryError::InvalidConstructedPath { .. })));
        assert!(matches!(paths.service("a/b"), Err(DiscoveryError::InvalidInstance { .. })));
        assert!(matches!(paths.instance("a/b", "1"), Err(DiscoveryError::InvalidInstance { .. })));
        let standard = Paths::new(Arc::new(DefaultPathConstructor::new("/s").unwrap())).unwrap();
        assert_eq!(standard.instance("a", "1").unwrap(), "/s/a/1");
        assert!(matches!(standard.instance("a", ".."), Err(DiscoveryError::InvalidInstance { .. })));

        struct BadBase;
        impl DiscoveryPathConstructor for BadBase {
            fn base_path(&self) -> String {
                "/trailing/".to_string()
            }
            fn path_for_instances(&self, name: &str) -> String {
                format!("/x/{name}")
            }
        }
        assert!(matches!(Paths::new(Arc::new(BadBase)), Err(DiscoveryError::InvalidConstructedPath { .. })));

        struct Elsewhere;
        impl DiscoveryPathConstructor for Elsewhere {
            fn base_path(&self) -> String {
                "/ok".to_string()
            }
            fn path_for_instances(&self, name: &str) -> String {
                format!("/ok/{name}")
            }
            fn path_for_instance(&self, _name: &str, id: &str) -> String {
                format!("/flat/{id}")
            }
        }
        assert!(
            matches!(Paths::new(Arc::new(Elsewhere)), Err(DiscoveryError::InvalidConstructedPath { ref path, .. }) if path == "/flat/instance")
        );
    }
}
