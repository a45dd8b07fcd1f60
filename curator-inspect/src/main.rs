//! `curator-inspect`: the command line of the [`curator_inspect`] library; see its docs for the
//! commands, the JSON shape and the exit codes. Logs (`RUST_LOG`, default `error`) go to stderr.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let code = curator_inspect::run(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr()).await;
    std::process::exit(code);
}
