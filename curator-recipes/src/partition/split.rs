//! How the set is split among the members: kazoo's default (round robin over the sorted
//! members) or the user's function.

use std::collections::BTreeSet;
use std::sync::Arc;

/// A function that chooses a member's share: `(this member's id, every member's id sorted,
/// every partition sorted)` to the partitions this member takes. Every member must compute the
/// same split from the same view (a pure function of its arguments), else members wait for each
/// other's partitions until the group changes again. Names not in the set are ignored.
pub type SplitFn = Arc<dyn Fn(&str, &[String], &[String]) -> Vec<String> + Send + Sync>;

/// kazoo's default split: the member at index `i` of the sorted members takes the partitions
/// at `i`, `i + n`, `i + 2n`... of the sorted set (`n` members). A member not in the list takes
/// nothing.
pub fn round_robin(id: &str, members: &[String], partitions: &[String]) -> Vec<String> {
    let Some(i) = members.iter().position(|m| m == id) else { return Vec::new() };
    partitions.iter().skip(i).step_by(members.len()).cloned().collect()
}

/// This member's share: `split`'s answer, kept to names in the set, each once, in set order.
pub(crate) fn share(split: &SplitFn, id: &str, members: &[String], partitions: &[String]) -> Vec<String> {
    let chosen: BTreeSet<String> = split(id, members, partitions).into_iter().collect();
    partitions.iter().filter(|p| chosen.contains(*p)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn round_robin_is_kazoos_split() {
        let parts = names(&["0", "1", "2"]);
        assert_eq!(round_robin("a", &names(&["a"]), &parts), parts);
        assert_eq!(round_robin("a", &names(&["a", "b"]), &parts), names(&["0", "2"]));
        assert_eq!(round_robin("b", &names(&["a", "b"]), &parts), names(&["1"]));
        assert_eq!(round_robin("c", &names(&["a", "b", "c", "d"]), &parts), names(&["2"]));
        assert!(round_robin("d", &names(&["a", "b", "c", "d"]), &parts).is_empty());
        assert!(round_robin("z", &names(&["a"]), &parts).is_empty());
    }

    #[test]
    fn a_share_keeps_set_names_once() {
        let split: SplitFn = Arc::new(|_, _, _| names(&["2", "x", "0", "2"]));
        assert_eq!(share(&split, "a", &names(&["a"]), &names(&["0", "1", "2"])), names(&["0", "2"]));
    }
}
