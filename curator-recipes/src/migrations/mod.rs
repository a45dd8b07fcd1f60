//! Migrations (Curator's `MigrationManager`, from curator-x-async): ordered, named sets of
//! writes, each applied once across every process, recorded under a meta path, applied under a
//! lock. Design: docs/architecture.md section 8.8.

mod manager;
mod set;

pub use manager::{AppliedMigrations, MigrationManager, MigrationReport, MIGRATION_META_NAME};
pub use set::{Migration, MigrationOp, MigrationSet};
