//! Running one test of the current test binary in a child process, for tests that need a
//! participant they can kill (a crashed process) or a process that outlives its parent.

use std::process::{Command, Stdio};

/// A command that runs the ignored test `test` (its exact name) of the current test binary,
/// alone and with its output shown; stdout and stderr go nowhere unless the caller sets them.
/// The child test should be `#[ignore]`d, so that a plain run of the binary skips it, and should
/// read what it needs from environment variables the caller sets on the command.
///
/// ```no_run
/// let mut child = curator_test::child_test_command("child_participant")
///     .env("MY_TEST_SPEC", "/path|id")
///     .spawn()
///     .expect("spawn the child");
/// child.kill().expect("kill it");
/// ```
///
/// # Panics
/// When the path of the current executable cannot be read.
pub fn child_test_command(test: &str) -> Command {
    let exe = std::env::current_exe().expect("the path of this test binary");
    let mut command = Command::new(exe);
    command
        .args(["--ignored", "--exact", test, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}
