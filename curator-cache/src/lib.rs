//! curator-cache
