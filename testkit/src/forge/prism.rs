//! Prism (`@stoplight/prism-cli`) as a validating proxy between a forge client and the mock:
//! it checks every request against the forge's published API description (GitHub's OpenAPI
//! `api.github.com.json` from `@octokit/openapi`, or Forgejo's Swagger 2.0 `swagger.v1.json`
//! from the `forgejo-api` crate), passes it to the mock, checks the mock's answer too, and
//! with `--errors` turns any violation either way into an error answer, so a test fails when
//! the client or the mock drifts from the real API.
//!
//! `.ci/install-forge-deps` installs Prism and both descriptions into `target/forge-cache/`;
//! without them [`validated`] and [`validated_forgejo`] print why and give `None`, and the
//! tests skip.
//!
//! Prism loads a description in several seconds (GitHub's is 13 MB), so a test binary starts
//! it once per forge, with one mock behind it, on a thread of their own; tests keep apart by
//! using repositories of their own.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::MockGitHub;
use crate::TIMEOUT;

/// The cache `.ci/install-forge-deps` fills.
pub fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/forge-cache")
}

/// The `prism` command.
pub fn prism_bin() -> PathBuf {
    cache().join("node_modules/.bin/prism")
}

/// The API a mock speaks and Prism validates against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    GitHub,
    /// Forgejo's, which Gitea speaks too.
    Forgejo,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Self::GitHub => "GitHub",
            Self::Forgejo => "Forgejo",
        }
    }

    /// The forge's published API description: GitHub's OpenAPI description of
    /// api.github.com, or Forgejo's Swagger 2.0 one.
    pub fn spec(self) -> PathBuf {
        match self {
            Self::GitHub => {
                cache().join("node_modules/@octokit/openapi/generated/api.github.com.json")
            }
            Self::Forgejo => cache().join("forgejo/swagger.v1.json"),
        }
    }

    /// Prism's log, the last run's: what Prism found wrong is in it.
    fn log(self) -> PathBuf {
        match self {
            Self::GitHub => cache().join("prism.log"),
            Self::Forgejo => cache().join("prism-forgejo.log"),
        }
    }

    /// Serves `mock` as this forge; gives its URL.
    async fn serve(self, mock: MockGitHub) -> String {
        match self {
            Self::GitHub => super::serve(mock).await,
            Self::Forgejo => super::forgejo::serve(mock).await,
        }
    }
}

/// A mock and Prism in front of it, shared by a test binary's tests.
pub struct Validated {
    /// The mock's state, for a test to act as a person and look.
    pub mock: MockGitHub,
    /// The mock's own URL, for calls that should not be validated (failures the description
    /// does not list for the operation).
    pub mock_url: String,
    /// Prism's URL: what the client under test is given.
    pub url: String,
    /// `sh` waiting on its stdin, which ends when the test process does, to stop Prism.
    _guard: Mutex<Child>,
}

static VALIDATED: OnceLock<Option<Validated>> = OnceLock::new();
static VALIDATED_FORGEJO: OnceLock<Option<Validated>> = OnceLock::new();

/// The test binary's mock GitHub behind Prism, started on first use; `None` (having printed
/// why) when Prism or the description is not installed, or Prism does not start.
pub fn validated() -> Option<&'static Validated> {
    validated_as(Api::GitHub)
}

/// The test binary's mock Forgejo behind a Prism of its own, as [`validated`].
pub fn validated_forgejo() -> Option<&'static Validated> {
    validated_as(Api::Forgejo)
}

/// The test binary's mock speaking `api` behind Prism, as [`validated`].
pub fn validated_as(api: Api) -> Option<&'static Validated> {
    let cell = match api {
        Api::GitHub => &VALIDATED,
        Api::Forgejo => &VALIDATED_FORGEJO,
    };
    cell.get_or_init(|| start(api)).as_ref()
}

fn start(api: Api) -> Option<Validated> {
    let name = api.name();
    if !prism_bin().exists() || !api.spec().exists() {
        eprintln!(
            "skipping: Prism or {name}'s API description is not installed in target/forge-cache (run .ci/install-forge-deps, which needs npm and curl)"
        );
        return None;
    }
    let mock = MockGitHub::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let served = mock.clone();
    std::thread::Builder::new()
        .name(format!("mock-{}", name.to_lowercase()))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    eprintln!("cannot start the mock {name}'s runtime: {e}");
                    return;
                }
            };
            runtime.block_on(async move {
                let url = api.serve(served).await;
                let _ = tx.send(url);
                std::future::pending::<()>().await;
            });
        })
        .expect("a thread for the mock forge");
    let mock_url = rx.recv_timeout(TIMEOUT).expect("the mock forge's URL");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port for Prism")
        .port();
    let log = api.log();
    let log_file = std::fs::File::create(&log).expect("Prism's log file");
    // Prism runs under `sh`, which stops it when its stdin closes: the test process holds the
    // other end, so Prism goes with it however it ends.
    let script = r#"prism="$1"; shift; "$prism" "$@" & pid=$!; read -r _; kill "$pid" 2>/dev/null"#;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(prism_bin())
        .args(["proxy", "--errors", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .arg(api.spec())
        .arg(&mock_url)
        .stdin(Stdio::piped())
        .stdout(log_file.try_clone().expect("Prism's log"))
        .stderr(log_file)
        .spawn()
        .expect("run Prism");
    let deadline = Instant::now() + TIMEOUT;
    let url = format!("http://127.0.0.1:{port}");
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if Instant::now() >= deadline || child.try_wait().ok().flatten().is_some() {
            if let Some(stdin) = child.stdin.as_mut() {
                let _ = stdin.write_all(b"\n");
            }
            eprintln!("skipping: Prism did not start; see {}", log.display());
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("Prism validating against {} at {url}", api.spec().display());
    Some(Validated {
        mock,
        mock_url,
        url,
        _guard: Mutex::new(child),
    })
}
