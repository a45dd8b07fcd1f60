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

/// A Java peer driven line by line: started with its arguments, it prints `READY` once
/// connected, then answers each command line with a line, and `QUIT` with `BYE`. Every wait is
/// bounded by the test deadline.
pub struct LinePeer {
    class: String,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl LinePeer {
    /// Runs peer `class` with `args` and waits for its `READY`.
    pub async fn start(class: &str, args: &[&str]) -> LinePeer {
        use tokio::io::AsyncBufReadExt;
        let mut child = peer(class)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run java (apt-get install default-jdk-headless)");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let mut peer =
            LinePeer { class: class.to_string(), child, stdin, lines: tokio::io::BufReader::new(stdout).lines() };
        let ready = peer.next_line().await;
        assert_eq!(ready.as_deref(), Some("READY"), "{class} did not start");
        peer
    }

    /// Sends one command line.
    pub async fn send(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to the java peer");
        self.stdin.flush().await.expect("flush");
    }

    /// The peer's next line; `None` once it has closed its output. Panics past the deadline.
    pub async fn next_line(&mut self) -> Option<String> {
        let line = tokio::time::timeout(curator_test::Timing::new().deadline(), self.lines.next_line()).await;
        let class = &self.class;
        line.unwrap_or_else(|_| panic!("{class} did not answer in time")).expect("read from the java peer")
    }

    /// Sends `line` and returns the answer.
    pub async fn command(&mut self, line: &str) -> String {
        self.send(line).await;
        let class = self.class.clone();
        self.next_line().await.unwrap_or_else(|| panic!("{class} ended instead of answering {line:?}"))
    }

    /// Sends `QUIT`, expects `BYE`, and waits for the process to exit successfully.
    pub async fn quit(mut self) {
        assert_eq!(self.command("QUIT").await, "BYE");
        let status = tokio::time::timeout(curator_test::Timing::new().deadline(), self.child.wait()).await;
        assert!(status.expect("the java peer exits").expect("wait").success(), "{} failed", self.class);
    }
}
