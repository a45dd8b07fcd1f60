//! Lock scenarios (filled in once the lock recipes land).
use crate::args::Args;
use curator_core::Result;
pub(crate) async fn lock(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
pub(crate) async fn rwlock(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
pub(crate) async fn waiters(_: &Args) -> Result<Vec<String>> {
    Ok(vec![])
}
