//! The connection gauge labelled per framework (issue 28 item 6; `curator_core::metrics`,
//! docs/operations.md section 6), against real ZooKeeper: a recorder installed in this process
//! sees each framework's series move.
//!
//! The recorder is global to the process (`tests::metrics`): these tests run one at a time
//! (`SERIAL`) and assert on the differences their own events made.

use curator_core::metrics as m;
use curator_core::CuratorError;
use curator_test::TestingServer;
use tests::metrics::{gauge, recorder, SERIAL};
use tests::{builder, connected, init_tracing, unique_path};

fn connect() -> String {
    TestingServer::shared().connect_string()
}

/// Each framework's transitions move its own series of `curator_connection_state`, labelled
/// with its `metrics_name`: the default (connect string and namespace) and one given to the
/// builder. Closing one shows 6 on its series only. A bad name is refused at `build()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_framework_has_its_own_connection_gauge() {
    init_tracing();
    recorder();
    let _serial = SERIAL.lock().await;
    let connect = connect();
    let namespace = unique_path("metrics-ns").trim_start_matches('/').to_string();
    let named = format!("orders-{namespace}");
    let a = connected(builder(&connect).namespace(namespace.as_str())).await;
    let b = connected(builder(&connect).metrics_name(named.as_str())).await;
    assert_eq!(a.metrics_name(), format!("{connect}/{namespace}"), "the default: connect string and namespace");
    assert_eq!(b.metrics_name(), named);
    let (of_a, of_b) = ([("framework", a.metrics_name())], [("framework", b.metrics_name())]);
    assert_eq!(gauge(m::CONNECTION_STATE, &of_a), 1.0);
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 1.0);

    a.close().await;
    assert_eq!(gauge(m::CONNECTION_STATE, &of_a), 6.0, "a is closed");
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 1.0, "b is still connected");
    b.close().await;
    assert_eq!(gauge(m::CONNECTION_STATE, &of_b), 6.0);

    for bad in ["", "  ", "a\nb"] {
        match builder(&connect).metrics_name(bad).build() {
            Err(CuratorError::InvalidArgument { reason, .. }) => assert!(reason.contains("metrics name"), "{reason}"),
            other => panic!("metrics name {bad:?}: not InvalidArgument: {other:?}"),
        }
    }
}
