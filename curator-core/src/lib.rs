//! curator-core
