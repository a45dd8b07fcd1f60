//! [`ZNode`]: a model read with its node's path and stat (Curator's `ZNode`).

use curator_core::zk::Stat;
use curator_core::ZPath;

/// A model read from a node, with the node's path and stat (Curator's `ZNode`). The stat's
/// `version` is what a compare-and-set write
/// ([`ModeledFramework::set_version`](crate::ModeledFramework::set_version)) names.
#[derive(Debug, Clone, PartialEq)]
pub struct ZNode<T> {
    /// The node's path.
    pub path: ZPath,
    /// The node's stat when it held `model`.
    pub stat: Stat,
    /// The model.
    pub model: T,
}
