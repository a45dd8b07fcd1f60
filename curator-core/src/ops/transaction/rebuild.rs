//! A transaction's results, read back after a write tag proved it applied although its reply
//! was lost (module `write_tag`): every node it wrote carries its zxid.

use zookeeper_client as zk;

use super::{Op, TransactionResult};
use crate::error::{CuratorError, Result};
use crate::framework::Session;
use crate::ops::outcome::Verdict;
use crate::path;

/// The results of `ops`, applied at `zxid`, as far as they can be read back on `session`
/// (documented on `TransactionBuilder::with_write_tag`).
pub(super) async fn results(session: &Session, ops: &[Op], zxid: i64) -> Result<Verdict<Vec<TransactionResult>>> {
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let result = match op {
            Op::Create { path, options, .. } if options.mode.is_sequential() => {
                match made_by(session, path, zxid).await? {
                    Some(made) => TransactionResult::Create { path: made },
                    None => {
                        return Ok(Verdict::Unknown(format!(
                            "it was applied (its write tag says so), but the sequential node it made under {path:?} \
                             is gone already, so its name cannot be known"
                        )))
                    }
                }
            }
            Op::Create { path, .. } => TransactionResult::Create { path: path.clone() },
            Op::Delete { path, .. } => TransactionResult::Delete { path: path.clone() },
            Op::Check { path, .. } => TransactionResult::Check { path: path.clone() },
            Op::SetData { path, options, .. } => {
                tracing::debug!(path = %path, "exists (a data write's stat, read back)");
                let stat = session.client().check_stat(path).await.map_err(|e| CuratorError::from_zk(path, e))?;
                TransactionResult::SetData { path: path.clone(), stat: written(stat, zxid, options.version) }
            }
        };
        results.push(result);
    }
    Ok(Verdict::Applied(results))
}

/// The stat a data write at `zxid` (at `version`, if it named one) left, from the node's stat
/// read now: exact when nothing wrote it since.
fn written(now: Option<zk::Stat>, zxid: i64, version: Option<i32>) -> zk::Stat {
    let known = version.map_or(-1, |v| v.wrapping_add(1));
    match now {
        Some(stat) if stat.mzxid == zxid => stat,
        Some(stat) => zk::Stat { mzxid: zxid, version: known, ..stat },
        None => zk::Stat {
            czxid: -1,
            mzxid: zxid,
            pzxid: -1,
            ctime: 0,
            mtime: 0,
            version: known,
            cversion: -1,
            aversion: -1,
            ephemeral_owner: 0,
            data_length: -1,
            num_children: -1,
        },
    }
}

/// The child made at `zxid` by a sequential create of `path` (`<parent>/<prefix>`): its path,
/// or `None` once it is gone. Lists the parent, then reads the candidates' stats in one round.
async fn made_by(session: &Session, path: &str, zxid: i64) -> Result<Option<String>> {
    let client = session.client();
    let (parent, prefix) = path::parent_and_node(path);
    tracing::debug!(path = parent, prefix, "getChildren (the node a sequential create made, read back)");
    let children = match client.list_children(parent).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(err) => return Err(CuratorError::from_zk(parent, err)),
    };
    let candidates: Vec<String> =
        children.into_iter().filter(|c| c.starts_with(prefix)).map(|c| path::make_path(parent, &c)).collect();
    // Every read is queued before any is awaited: one round trip (section 2.1).
    let reads: Vec<_> = candidates.iter().map(|c| client.check_stat(c)).collect();
    for (read, candidate) in futures::future::join_all(reads).await.into_iter().zip(&candidates) {
        match read {
            Ok(Some(stat)) if stat.czxid == zxid => return Ok(Some(candidate.clone())),
            Ok(_) | Err(zk::Error::NoNode) => {}
            Err(err) => return Err(CuratorError::from_zk(candidate, err)),
        }
    }
    Ok(None)
}
