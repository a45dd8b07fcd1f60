//! Where created nodes get their ACLs when an operation names none (Curator's `ACLProvider`).

use std::fmt::Debug;

use zookeeper_client::Acl;

/// Supplies ACLs for nodes the framework creates.
pub trait AclProvider: Send + Sync + Debug {
    /// ACLs for nodes when nothing more specific applies.
    fn default_acl(&self) -> Vec<Acl>;

    /// ACLs for the node at `path`: the full path as sent, namespace and protection prefix
    /// included (without the sequence number, which the server adds), as Curator's
    /// `ACLProvider.getAclForPath` receives it. Asked for created nodes, the parents a create
    /// makes, and the namespace node and its parents. By default,
    /// [`default_acl`](Self::default_acl).
    fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        let _ = path;
        self.default_acl()
    }
}

/// Open to everyone (`world:anyone`, all permissions), as Curator's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultAclProvider;

impl AclProvider for DefaultAclProvider {
    fn default_acl(&self) -> Vec<Acl> {
        zookeeper_client::Acls::anyone_all().to_vec()
    }
}

/// The same list for every node.
#[derive(Debug, Clone)]
pub struct FixedAclProvider(pub Vec<Acl>);

impl AclProvider for FixedAclProvider {
    fn default_acl(&self) -> Vec<Acl> {
        self.0.clone()
    }
}
