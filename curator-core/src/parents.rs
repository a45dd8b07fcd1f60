//! Creating the missing nodes along a path, as Curator's `ZKPaths.mkdirs`: the namespace node
//! (which the framework ensures before an operation runs in it, docs/architecture.md section
//! 3.6) and the parents of a create (`ops::create`, `make_parents`).

use zookeeper_client as zk;

use crate::acl::AclProvider;
use crate::error::{CuratorError, Result};
use crate::path;

/// Creates the namespace node `namespace` (a full path) and its missing parents as persistent
/// nodes, on `client` (not rooted at the namespace), with `provider`'s ACLs for their paths, as
/// Curator's `NamespaceImpl` does through `ZKPaths.mkdirs`.
pub(crate) async fn ensure_namespace(client: &zk::Client, namespace: &str, provider: &dyn AclProvider) -> Result<()> {
    let mut nodes = path::ancestors(namespace);
    nodes.push(namespace);
    create_missing(client, &nodes, zk::CreateMode::Persistent, |p| provider.acl_for_path(p)).await
}

/// Creates whichever of `nodes` (each the parent of the next) are missing, with `acl_for`'s
/// ACLs. It walks up from the last until one is created or exists, then down: so only the
/// deepest existing node must let us create in it. The server checks CREATE on the parent
/// before it says that a node exists, so creating from the top would fail under an ancestor
/// nobody may create in, as Curator's `ZKPaths.mkdirs` avoids too (ZOOKEEPER-2590).
pub(crate) async fn create_missing(
    client: &zk::Client,
    nodes: &[&str],
    mode: zk::CreateMode,
    acl_for: impl Fn(&str) -> Vec<zk::Acl>,
) -> Result<()> {
    let mut exists = nodes.len();
    while exists > 0 {
        let node = nodes[exists - 1];
        match create_node(client, node, mode, &acl_for(node)).await {
            Ok(()) => break,
            Err(zk::Error::NoNode) if exists > 1 => exists -= 1,
            Err(err) => return Err(CuratorError::from_zk(node, err)),
        }
    }
    for node in nodes.iter().skip(exists) {
        create_node(client, node, mode, &acl_for(node)).await.map_err(|e| CuratorError::from_zk(node, e))?;
    }
    Ok(())
}

/// Creates `node` with no data; one that exists is fine.
async fn create_node(
    client: &zk::Client,
    node: &str,
    mode: zk::CreateMode,
    acl: &[zk::Acl],
) -> std::result::Result<(), zk::Error> {
    tracing::debug!(path = node, ?mode, "create parent");
    match client.create(node, &[], &mode.with_acls(zk::Acls::new(acl))).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(err) => Err(err),
    }
}
