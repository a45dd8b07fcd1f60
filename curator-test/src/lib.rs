//! curator-test
