//! The forge client: against the mock GitHub through Prism, which checks every request and
//! answer against GitHub's published OpenAPI description (`validated`); how rate limits,
//! outages and refusals come out, without the token (`failures`); and a real `git push` to
//! `git daemon` on loopback (`push`).

mod failures;
mod push;
mod validated;

use catalyst::daemon::forge::{Forge, Token};
use catalyst::domain::config::forge::{ForgeConfig, ForgeKind};

/// The token every test's client uses: tests look for it in errors.
pub const TOKEN: &str = "ghp_catalystTestToken0123456789";

/// A GitHub client for `repository` on the API at `api`, made from a config as the daemon
/// will make it.
pub fn client(api: &str, repository: &str) -> Forge {
    let config = ForgeConfig {
        kind: ForgeKind::Github,
        api_url: Some(api.to_owned()),
        repository: repository.to_owned(),
        token_file: "unused".into(),
        remote: None,
        issue_label: None,
    };
    catalyst::domain::config::forge::check(&config).expect("a valid forge config");
    Forge::new(&config, Token::new(TOKEN)).expect("a GitHub client")
}
