//! wardle-server's command: its options, then [`wardle_server::run`].

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let options: wardle_server::Options = kubechain_apiserver::parse();
    kubechain_apiserver::run(options.server.logging, async move {
        wardle_server::run(options)
            .await
            .context("serving wardle.example.com")
    })
}
