//! The scenarios of Curator's `TestZPath` (curator-x-async), each test naming the one it
//! follows, and the bad input Curator throws on, here typed errors.

use super::*;

fn p(path: &str) -> ZPath {
    ZPath::parse(path).expect(path)
}

fn ids(path: &str) -> ZPath {
    ZPath::parse_with_ids(path).expect(path)
}

/// TestZPath.testRoot.
#[test]
fn root() {
    assert_eq!(ZPath::root().node_name(), "/");
    assert!(ZPath::root().is_root());
    assert_eq!(ZPath::root().child("foo").unwrap().parent().unwrap(), ZPath::root());
    assert!(ZPath::root().child("foo").unwrap().parent().unwrap().is_root());
    assert_eq!(ZPath::root().to_string(), "/");
    assert_eq!(ZPath::root().full_path().unwrap(), "/");
}

/// TestZPath.testBasic.
#[test]
fn basic() {
    let path = ZPath::root().child("one").unwrap().child("two").unwrap();
    assert!(!path.is_root());
    assert_eq!(path, ZPath::root().child("one").unwrap().child("two").unwrap());
    assert_ne!(path, ZPath::root().child("onex").unwrap().child("two").unwrap());
    assert_eq!(path.node_name(), "two");
    assert_eq!(path.full_path().unwrap(), "/one/two");
    assert_eq!(path.parent().unwrap().full_path().unwrap(), "/one");
    assert!(path.starts_with(&ZPath::root().child("one").unwrap()));
    assert!(!path.starts_with(&ZPath::root().child("two").unwrap()));

    // parse never makes parameters: a node may look like one and be a name.
    for looks_like in ["/one/{two}/three", "/one/{id}/three", "/one/{others}/three"] {
        let path = p(looks_like);
        assert!(path.is_resolved(), "{looks_like}");
        assert_eq!(path.full_path().unwrap(), looks_like);
        assert_eq!(path.literal_ids().count(), 1, "{looks_like}: the look-alike is named");
    }
    assert_eq!(p("/one/{}/{a{b}}/x").literal_ids().count(), 0, "parse_with_ids would not make these parameters");
    assert!(ZPath::is_id("{id}") && !ZPath::is_id("{}") && !ZPath::is_id("id"));
}

/// TestZPath.testParsing.
#[test]
fn parsing() {
    assert_eq!(p("/"), ZPath::root());
    let three = ZPath::root().child("one").unwrap().child("two").unwrap().child("three").unwrap();
    assert_eq!(p("/one/two/three"), three);
    assert_eq!(p("/one/two/three"), ZPath::from_nodes(["one", "two", "three"]).unwrap());
    let param = ZPath::parameter(DEFAULT_PARAMETER);
    assert_eq!(ids("/one/{id}/two/{id}"), ZPath::from_nodes(["one", &param, "two", &param]).unwrap());
}

/// TestZPath.testUnresolvedPath: Curator throws `IllegalStateException`; here a typed error.
#[test]
fn unresolved_path_has_no_full_path() {
    let path = ZPath::from_nodes(["one", &ZPath::parameter("id"), "two"]).unwrap();
    match path.full_path() {
        Err(CuratorError::InvalidArgument { path, reason }) => {
            assert_eq!(path, "/one/{id}/two");
            assert!(reason.contains("{id}"), "{reason}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// TestZPath.testResolvedPath.
#[test]
fn resolved_path() {
    let id = ZPath::parameter("id");
    let path = ZPath::from_nodes(["one", &id, "two", &id]).unwrap();
    assert_eq!(path.resolved(["a", "b"]).unwrap(), ZPath::from_nodes(["one", "a", "two", "b"]).unwrap());
}

/// TestZPath.testSchema.
#[test]
fn schema_pattern() {
    let id = ZPath::parameter("id");
    assert_eq!(ZPath::from_nodes(["one", &id, "two", &id]).unwrap().schema_pattern(), "/one/.*/two/.*");
    assert_eq!(p("/one/two/three").schema_pattern(), "/one/two/three");
    assert_eq!(ids("/one/{id}/three").schema_pattern(), "/one/.*/three");
    assert_eq!(ids("/{id}/{id}/three").schema_pattern(), "/.*/.*/three");
    assert_eq!(ZPath::root().schema_pattern(), "/");
}

/// TestZPath.testCustomIds.
#[test]
fn custom_ids() {
    assert_eq!(ids("/a/{a}/bee/{bee}/c/{c}").to_string(), "/a/{a}/bee/{bee}/c/{c}");
    let id = ZPath::parameter(DEFAULT_PARAMETER);
    assert_eq!(ZPath::from_nodes(["a", &id, "b", &id]).unwrap().to_string(), "/a/{id}/b/{id}");
    let (foo, bar) = (ZPath::parameter("foo"), ZPath::parameter("bar"));
    assert_eq!(ZPath::from_nodes(["a", &foo, "b", &bar]).unwrap().to_string(), "/a/{foo}/b/{bar}");
    assert_eq!(ids("/a/{a}/bee/{bee}").parameters().collect::<Vec<_>>(), ["a", "bee"]);
}

/// TestZPath.testPartialResolution.
#[test]
fn partial_resolution() {
    let path = ids("/one/{1}/two/{2}");
    assert!(!path.parent().unwrap().is_resolved());
    assert!(!path.parent().unwrap().parent().unwrap().is_resolved());
    assert!(path.parent().unwrap().parent().unwrap().parent().unwrap().is_resolved());
    assert!(!path.is_resolved());

    let path = path.resolved(["p1"]).unwrap();
    assert!(!path.is_resolved());
    assert!(path.parent().unwrap().is_resolved());
    assert_eq!(path.to_string(), "/one/p1/two/{2}");

    let path = path.resolved(["p2"]).unwrap();
    assert!(path.is_resolved());
    assert_eq!(path.to_string(), "/one/p1/two/p2");
}

/// Ours: a concrete path read back against a template (a modeled node's children, a schema).
#[test]
fn values_in_a_concrete_path() {
    let template = ids("/config/{service}/{key}");
    assert_eq!(template.values_in("/config/a/b"), Some(vec!["a".to_string(), "b".to_string()]));
    assert!(template.matches("/config/a/b"));
    assert_eq!(template.values_in("/config/a"), None);
    assert_eq!(template.values_in("/other/a/b"), None);
    assert_eq!(template.values_in("/config/a/b/c"), None);
    assert_eq!(template.values_in("not a path"), None);
    assert_eq!(p("/x").values_in("/x"), Some(vec![]));
}

/// Bad input, where Curator throws: typed errors, never a panic.
#[test]
fn bad_input_is_a_typed_error() {
    let template = ids("/config/{service}");
    for value in ["a/b", "", ".", "..", "nul\0", "/"] {
        match template.resolved([value]) {
            Err(CuratorError::InvalidPath { .. }) => {}
            other => panic!("value {value:?}: expected InvalidPath, got {other:?}"),
        }
    }
    assert!(matches!(template.resolved(["a", "b"]), Err(CuratorError::InvalidArgument { .. })));
    assert!(matches!(ZPath::root().parent(), Err(CuratorError::InvalidPath { .. })));
    for path in ["", "no-slash", "/a//b", "/a/", "/a/./b"] {
        assert!(matches!(ZPath::parse(path), Err(CuratorError::InvalidPath { .. })), "{path:?}");
        assert!(matches!(ZPath::parse_with_ids(path), Err(CuratorError::InvalidPath { .. })), "{path:?}");
    }
    assert!(matches!(ZPath::root().child("a/b"), Err(CuratorError::InvalidPath { .. })));
    let long = format!("/{}", "x".repeat(path::MAX_PATH_LEN));
    assert!(matches!(ZPath::parse(&long), Err(CuratorError::InvalidPath { .. })));
    // Braces that do not make a parameter are a name: `{}`, `{a{b}`, `x{a}`.
    for name in ["{}", "{a{b}", "x{a}", "{a"] {
        let path = ZPath::root().child(name).unwrap();
        assert!(path.is_resolved(), "{name}");
    }
}
