//! Part 3 (configuration).
use super::Checks;
use curator_core::Result;
pub(crate) async fn run(_: &str, _: &str, _: &mut Checks) -> Result<()> {
    Ok(())
}
