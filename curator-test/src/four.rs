//! ZooKeeper's four-letter words (`ruok`, `srvr`, `stat`, `mntr`, `conf`, `cons`, ...).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::TestingError;

/// How long [`four_letter_word`] waits for the whole answer.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);
/// Answers longer than this are cut off (`cons`/`wchp` on a busy server can be long).
const MAX_ANSWER: u64 = 16 << 20;

/// Sends a four-letter word (`srvr`, `ruok`, `mntr`, `conf`, `cons`, ...) to the server at
/// `addr` (`host:port`) and returns its whole answer.
///
/// Fails with [`TestingError::Io`] when the connection is refused or breaks and with
/// [`TestingError::Timeout`] when the server does not finish answering within 5 s (a paused
/// server accepts the connection but never answers).
pub async fn four_letter_word(addr: &str, cmd: &str) -> Result<String, TestingError> {
    four_letter_word_within(addr, cmd, FOUR_LETTER_TIMEOUT).await
}

pub(crate) async fn four_letter_word_within(addr: &str, cmd: &str, timeout: Duration) -> Result<String, TestingError> {
    let exchange = async {
        let mut stream =
            TcpStream::connect(addr).await.map_err(|e| TestingError::io(format!("connect to {addr}"), e))?;
        stream.write_all(cmd.as_bytes()).await.map_err(|e| TestingError::io(format!("send {cmd} to {addr}"), e))?;
        let mut answer = Vec::new();
        (&mut stream)
            .take(MAX_ANSWER)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| TestingError::io(format!("read answer to {cmd} from {addr}"), e))?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(TestingError::timeout(format!("answer to {cmd} from {addr}"), timeout)),
    }
}
