//! curator-recipes
