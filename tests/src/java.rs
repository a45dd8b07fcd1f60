//! Java peers for the interop tests: Apache Curator 5.4 from Debian's jars, and the peers in
//! `tests/java/`, compiled with `javac` once per test binary. Missing `javac` or jars fail the
//! test with a message saying what to install.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::process::Command;

const JARS: &[&str] = &[
    "curator-client",
    "curator-framework",
    "curator-recipes",
    "zookeeper",
    "zookeeper-jute",
    "guava",
    "slf4j-api",
    "slf4j-nop",
    "netty-handler",
    "netty-common",
    "netty-buffer",
    "netty-transport",
    "netty-codec",
    "netty-resolver",
    "netty-transport-native-epoll",
    "netty-transport-native-unix-common",
    "metrics-core",
    "commons-lang3",
    "commons-io",
    "curator-x-discovery",
    "jackson-core",
    "jackson-databind",
    "jackson-annotations",
];

/// Curator's jars and their dependencies, as a class path.
pub fn classpath() -> String {
    let dir = Path::new("/usr/share/java");
    let missing: Vec<&str> = JARS.iter().copied().filter(|j| !dir.join(format!("{j}.jar")).exists()).collect();
    assert!(
        missing.is_empty(),
        "Curator interop needs Debian's jars in /usr/share/java; missing: {missing:?}. \
         Install: apt-get install libcurator-recipes-java libcurator-discovery-java libslf4j-java default-jdk-headless"
    );
    JARS.iter().map(|j| format!("/usr/share/java/{j}.jar")).collect::<Vec<_>>().join(":")
}

/// Compiles `tests/java/<class>.java` (once per test binary) into a temporary directory and
/// returns the directory.
pub fn compiled(class: &str) -> PathBuf {
    static DONE: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let done = done.get_or_insert_with(HashMap::new);
    if let Some(dir) = done.get(class) {
        return dir.clone();
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("java/{class}.java"));
    let out = std::env::temp_dir().join(format!("curator-rs-{}-{}", class.to_lowercase(), std::process::id()));
    std::fs::create_dir_all(&out).expect("create the peer's class directory");
    let status = std::process::Command::new("javac")
        .args(["-cp", &classpath(), "-d"])
        .arg(&out)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| {
            panic!("Curator interop needs `javac` (apt-get install default-jdk-headless): cannot run it: {e}")
        });
    assert!(status.success(), "javac failed to compile {}", source.display());
    done.insert(class.to_string(), out.clone());
    out
}

/// A `java` command running peer `class` (compiled on first use) with Curator on its class path.
pub fn peer(class: &str) -> Command {
    let cp = format!("{}:{}", compiled(class).display(), classpath());
    let mut command = Command::new("java");
    command.args(["-cp", &cp, class]).kill_on_drop(true);
    command
}

/// A Java peer driven line by line: one command line in, one answer line out. Its output may
/// also carry events its listeners print at any time (an item consumed, a count changed, a
/// leader elected): a task reads every line, and those `on_event` takes (it returns true) are
/// events, the others answers, in order.
pub struct LinePeer {
    class: String,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    answers: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl LinePeer {
    /// Runs peer `class` with `args` and waits for its `READY`; every line it prints is an
    /// answer.
    pub async fn start(class: &str, args: &[&str]) -> LinePeer {
        LinePeer::with_events(class, args, |_| false).await
    }

    /// Runs peer `class` with `args` and waits for its `READY`; the lines `on_event` takes are
    /// events, the others answers.
    pub async fn with_events(
        class: &str,
        args: &[&str],
        mut on_event: impl FnMut(&str) -> bool + Send + 'static,
    ) -> LinePeer {
        use tokio::io::AsyncBufReadExt;
        let mut child = peer(class)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run java (apt-get install default-jdk-headless)");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stdin = child.stdin.take().expect("stdin");
        let (tx, answers) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if !on_event(&line) {
                    let _ = tx.send(line);
                }
            }
        });
        let mut peer = LinePeer { class: class.to_string(), child, stdin, answers };
        assert_eq!(peer.answer("(start)").await, "READY", "{class} did not start");
        peer
    }

    /// Sends one command line.
    pub async fn send(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to the java peer");
        self.stdin.flush().await.expect("flush");
    }

    /// The next line that is not an event. Panics past the deadline, or if the output ended.
    pub async fn answer(&mut self, what: &str) -> String {
        let class = &self.class;
        tokio::time::timeout(curator_test::Timing::new().deadline(), self.answers.recv())
            .await
            .unwrap_or_else(|_| panic!("{class} did not answer {what:?} in time"))
            .unwrap_or_else(|| panic!("{class}'s output ended instead of answering {what:?}"))
    }

    /// Sends `line` and returns the answer, ERROR included.
    pub async fn try_command(&mut self, line: &str) -> String {
        self.send(line).await;
        self.answer(line).await
    }

    /// Sends `line` and returns the answer; panics on ERROR.
    pub async fn command(&mut self, line: &str) -> String {
        let answer = self.try_command(line).await;
        assert!(!answer.starts_with("ERROR"), "{} failed {line:?}: {answer}", self.class);
        answer
    }

    /// Sends `QUIT`, expects `BYE`, and waits for the process to exit successfully.
    pub async fn quit(mut self) {
        assert_eq!(self.try_command("QUIT").await, "BYE");
        let status = tokio::time::timeout(curator_test::Timing::new().deadline(), self.child.wait()).await;
        assert!(status.expect("the java peer exits").expect("wait").success(), "{} failed", self.class);
    }
}
