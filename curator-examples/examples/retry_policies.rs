//! Retry policies: what each would sleep before its retries, and an operation retried through a
//! server restart.
//!
//! `cargo run -p curator-examples --example retry_policies`

use std::time::Duration;

use curator_core::CuratorFramework;
use curator_core::{
    BoundedExponentialBackoffRetry, ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryOneTime, RetryPolicy,
    RetryUntilElapsed,
};
use curator_examples::init_logging;
use curator_test::TestingServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_logging();
    let ms = Duration::from_millis;
    let policies: Vec<(&str, Box<dyn RetryPolicy>)> = vec![
        ("ExponentialBackoffRetry(100ms, 4)", Box::new(ExponentialBackoffRetry::new(ms(100), 4))),
        (
            "BoundedExponentialBackoffRetry(100ms, 300ms, 4)",
            Box::new(BoundedExponentialBackoffRetry::new(ms(100), ms(300), 4)),
        ),
        ("RetryNTimes(3, 50ms)", Box::new(RetryNTimes::new(3, ms(50)))),
        ("RetryOneTime(50ms)", Box::new(RetryOneTime::new(ms(50)))),
        ("RetryUntilElapsed(1s, 200ms)", Box::new(RetryUntilElapsed::new(Duration::from_secs(1), ms(200)))),
        ("RetryForever(1s)", Box::new(RetryForever::new(Duration::from_secs(1)))),
    ];
    for (name, policy) in &policies {
        let sleeps: Vec<_> = (0..5).map(|n| policy.allow_retry(n, ms(250) * n)).collect();
        tracing::info!("{name}: {sleeps:?}");
    }

    // An operation that starts while the server is down succeeds once it is back.
    let mut server = TestingServer::start().await?;
    let client = CuratorFramework::builder()
        .connect_string(server.connect_string())
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryUntilElapsed::new(Duration::from_secs(20), ms(250)))
        .build()?;
    client.start()?;
    client.block_until_connected(Duration::from_secs(10)).await?;
    server.stop().await?;
    let write = tokio::spawn({
        let client = client.clone();
        async move { client.create().for_path("/survived-a-restart", b"yes".to_vec()).await }
    });
    server.restart().await?;
    tracing::info!("created {} despite the restart", write.await??);
    client.close().await;
    Ok(())
}
