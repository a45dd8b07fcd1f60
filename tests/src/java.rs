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
