//! The one check every discovery path goes through: `parent/<child>` for a child that is one
//! node name. The discovery and its caches both build paths with it.

use curator_core::path;

use crate::DiscoveryError;

/// `parent/<child>`, for a child that is one node name.
pub(crate) fn node_path(parent: &str, child: &str) -> Result<String, DiscoveryError> {
    if child.is_empty() || child.contains('/') || child == "." || child == ".." {
        return Err(DiscoveryError::InvalidInstance {
            id: child.to_string(),
            reason: format!("{child:?} is not one node name"),
        });
    }
    let path = path::make_path(parent, child);
    path::validate(&path)?;
    Ok(path)
}
