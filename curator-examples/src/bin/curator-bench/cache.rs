//! Cache scenarios (filled in once the caches land).
use crate::args::Args;
use curator_core::Result;
pub(crate) async fn children_cache(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
pub(crate) async fn tree_cache(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
pub(crate) async fn cache_memory(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
