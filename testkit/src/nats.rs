//! A real NATS JetStream cluster for the tests that run agents on other machines: `n`
//! `nats-server` processes on loopback ports, each with its own JetStream folder in a
//! temporary folder, routed to each other (one node is a plain server). A node can be killed (`SIGKILL`) and started again
//! on the same ports and folder. The servers are killed when the cluster is dropped.
//!
//! Also the rest of a cluster's set-up: a bare repository as the shared remote
//! ([`shared_remote`]) and `catalyst worker` processes ([`start_worker`]), and the keys they
//! sign with: the daemon's, and those of the workers [`WORKERS`], which the daemon's config
//! ([`NatsCluster::config_for`]) lists.
//!
//! The nodes take any client ([`NatsCluster::start`]), clients with a token
//! ([`NatsCluster::start_with_token`]), or nkey users with the permissions docs/cluster.md
//! gives ([`NatsCluster::start_with_users`]): the daemon may do everything, a worker only
//! take orders and send on its own subjects.
//!
//! `nats-server` comes from Debian's package (`.ci/install-test-deps` installs it);
//! [`NatsCluster::start`] gives `None`, printing why, where it is missing, so the tests skip.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

use std::time::Duration;

use crate::poll::poll;
use crate::web::free_port;
use crate::Workspace;

/// One server of the cluster.
struct Node {
    name: String,
    client_port: u16,
    config: PathBuf,
    log: PathBuf,
    process: Option<Child>,
}

/// The workers the daemon's config lists, each with its key ([`NatsCluster::key_file`]).
pub const WORKERS: [&str; 4] = ["w0", "w1", "w2", "w3"];

/// How clients log in to the nodes.
enum Login {
    Anyone,
    /// The token, and the file holding it.
    Token(String, PathBuf),
    /// NATS nkey users: the daemon and each of [`WORKERS`], with their permissions.
    Users,
}

/// `n` routed `nats-server`s with JetStream.
pub struct NatsCluster {
    nodes: Vec<Node>,
    server: PathBuf,
    login: Login,
    /// The CA whose certificate the nodes present for `127.0.0.1`, when clients speak TLS.
    tls_ca: Option<PathBuf>,
    _dir: TempDir,
}

/// How a cluster's nodes are set up.
#[derive(Default)]
struct Setup<'a> {
    token: Option<&'a str>,
    users: bool,
    tls: bool,
}

/// What every node's config says besides its ports.
struct NodeSettings<'a> {
    token: Option<&'a str>,
    /// The `authorization` block of the nkey users.
    users: Option<String>,
    /// The node's certificate and key.
    tls: Option<(PathBuf, PathBuf)>,
}

impl NodeSettings<'_> {
    /// The nodes on `ports` (client, route), their configs written in `dir`.
    fn nodes(&self, dir: &Path, ports: &[(u16, u16)]) -> Vec<Node> {
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        ports
            .iter()
            .enumerate()
            .map(|(i, (client, route))| {
                let name = format!("n{}", i + 1);
                let store = dir.join(&name);
                let config = dir.join(format!("{name}.conf"));
                let mut text = format!(
                    "server_name: {name}\nlisten: \"127.0.0.1:{client}\"\n\
                     jetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}}\n",
                    store.display(),
                );
                if let Some(token) = self.token {
                    text.push_str(&format!("authorization {{\n  token: {token:?}\n}}\n"));
                }
                if let Some(users) = &self.users {
                    text.push_str(users);
                }
                if let Some((cert, key)) = &self.tls {
                    text.push_str(&format!(
                        "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n}}\n",
                        cert.display().to_string(),
                        key.display().to_string()
                    ));
                }
                // One node is a server of its own: a cluster of one elects no leader.
                if ports.len() > 1 {
                    text.push_str(&format!(
                        "cluster {{\n  name: catalyst-test\n  listen: \"127.0.0.1:{route}\"\n  routes: [{}]\n}}\n",
                        routes.join(", "),
                    ));
                }
                std::fs::write(&config, text).expect("write a node's config");
                Node {
                    log: dir.join(format!("{name}.log")),
                    name,
                    client_port: *client,
                    config,
                    process: None,
                }
            })
            .collect()
    }
}

/// A CA and a certificate of `127.0.0.1` it signed, made with `openssl` in `dir`: the CA's
/// certificate, the server's and its key. `None` without `openssl`.
fn make_certificates(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let openssl = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .ok()?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let made = openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2"],
            &["-subj", "/CN=catalyst test CA"],
        ]
        .concat(),
    ) && openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server-key.pem",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    ) && openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    made.then(|| {
        (
            dir.join("ca.pem"),
            dir.join("server.pem"),
            dir.join("server-key.pem"),
        )
    })
}

/// The seed file `name` in the cluster's `keys` folder, made with a new key the first time,
/// and its public key.
fn key(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join("keys").join(format!("{name}.nk"));
    let (signer, _) =
        catalyst::daemon::cluster::trust::Signer::load_or_make(&file).expect("a key file");
    (file, signer.public_key())
}

/// The `authorization` block of nodes whose clients are nkey users: the daemon may publish
/// and subscribe to everything; a worker may take orders (and make the consumer of a model
/// it names), and publish leases, ends and presence on its own subjects only.
fn users_block(dir: &Path) -> String {
    let (_, daemon) = key(dir, "nats-daemon");
    let mut users = vec![format!(
        "    {{ nkey: {daemon:?}, permissions: {{ publish: \">\", subscribe: \">\" }} }}"
    )];
    for worker in WORKERS {
        let (_, nkey) = key(dir, &format!("nats-{worker}"));
        users.push(format!(
            "    {{ nkey: {nkey:?}, permissions: {{\n      publish: {{ allow: [{}] }}\n      subscribe: {{ allow: [\"_INBOX.>\", \"catalyst.cancel\"] }}\n    }} }}",
            worker_publishes("catalyst", worker)
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    format!(
        "authorization {{\n  users: [\n{}\n  ]\n}}\n",
        users.join("\n")
    )
}

/// What the worker `worker` of the daemon named `name` may publish (docs/cluster.md).
pub fn worker_publishes(name: &str, worker: &str) -> Vec<String> {
    let stream = format!("{name}-attempts");
    vec![
        "$JS.API.INFO".into(),
        format!("$JS.API.STREAM.INFO.{stream}"),
        format!("$JS.API.CONSUMER.NAMES.{stream}"),
        format!("$JS.API.CONSUMER.INFO.{stream}.*"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.>"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.*"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.*"),
        format!("$JS.ACK.{stream}.>"),
        format!("{name}.lease.{worker}"),
        format!("{name}.end.{worker}"),
        format!("{name}.worker.{worker}"),
    ]
}

/// `nats-server` on the `PATH`, or in `/usr/sbin` where Debian puts it.
fn nats_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|p| p.is_file())
}

/// Whether `nats-server` is installed, for a caller that skips without it before starting
/// anything.
pub fn available() -> bool {
    nats_server().is_some()
}

impl NatsCluster {
    /// Starts `n` nodes and waits until JetStream answers on every one (its meta leader
    /// elected). `None`, saying why, when `nats-server` is not installed.
    pub async fn start(n: usize) -> Option<NatsCluster> {
        Self::start_with(n, Setup::default()).await
    }

    /// [`NatsCluster::start`] whose nodes speak TLS only, with a certificate of `127.0.0.1`
    /// from a CA of their own ([`NatsCluster::tls_ca`]); their URLs are `tls://`. `None`,
    /// saying why, without `openssl` to make the certificates.
    pub async fn start_with_tls(n: usize) -> Option<NatsCluster> {
        Self::start_with(
            n,
            Setup {
                tls: true,
                ..Setup::default()
            },
        )
        .await
    }

    /// [`NatsCluster::start`] whose nodes take only the nkey users of the daemon and of
    /// [`WORKERS`], each with its permissions; [`NatsCluster::nats_nkey_file`] holds each one's
    /// seed, which the daemon's config and [`start_worker`] use.
    pub async fn start_with_users(n: usize) -> Option<NatsCluster> {
        Self::start_with(
            n,
            Setup {
                users: true,
                ..Setup::default()
            },
        )
        .await
    }

    /// [`NatsCluster::start`] whose nodes take only clients that give `token`; the daemon's
    /// config ([`NatsCluster::config_for`]) and the workers ([`start_worker`]) read it from
    /// [`NatsCluster::token_file`].
    pub async fn start_with_token(n: usize, token: &str) -> Option<NatsCluster> {
        Self::start_with(
            n,
            Setup {
                token: Some(token),
                ..Setup::default()
            },
        )
        .await
    }

    async fn start_with(n: usize, setup: Setup<'_>) -> Option<NatsCluster> {
        let Some(server) = nats_server() else {
            eprintln!("skipping: nats-server is not installed (.ci/install-test-deps installs it)");
            return None;
        };
        let dir = tempfile::tempdir().expect("a folder for the cluster");
        let Setup { token, users, tls } = setup;
        let users = users.then(|| users_block(dir.path()));
        let certificates = match tls {
            true => match make_certificates(dir.path()) {
                Some(made) => Some(made),
                None => {
                    eprintln!("skipping: openssl cannot make the TLS test certificates");
                    return None;
                }
            },
            false => None,
        };
        let login = match (token, users.is_some()) {
            (Some(t), _) => {
                let file = dir.path().join("token");
                std::fs::write(&file, format!("{t}\n")).expect("the token file");
                Login::Token(t.to_owned(), file)
            }
            (None, true) => Login::Users,
            (None, false) => Login::Anyone,
        };
        let settings = NodeSettings {
            token,
            users,
            tls: certificates
                .as_ref()
                .map(|(_, cert, key)| (cert.clone(), key.clone())),
        };
        let mut cluster = NatsCluster {
            nodes: Vec::new(),
            server,
            login,
            tls_ca: certificates.map(|(ca, _, _)| ca),
            _dir: dir,
        };
        // The ports are free when picked, but something else may take one before its node
        // listens: the nodes are then set up again on other ports.
        for attempt in 1.. {
            let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
            cluster.nodes = settings.nodes(cluster._dir.path(), &ports);
            for i in 0..n {
                cluster.spawn(i);
            }
            let mut ready = Ok(());
            for i in 0..n {
                ready = cluster.ready(i).await;
                if ready.is_err() {
                    break;
                }
            }
            match ready {
                Ok(()) => break,
                Err(why) if attempt < 3 && why.contains("address already in use") => {
                    eprintln!("a node's port was taken; starting the cluster again:\n{why}");
                    for i in 0..n {
                        cluster.kill(i);
                        let node = &cluster.nodes[i];
                        let _ = std::fs::remove_file(&node.log);
                        let _ = std::fs::remove_dir_all(cluster._dir.path().join(&node.name));
                    }
                }
                Err(why) => panic!("{why}"),
            }
        }
        Some(cluster)
    }

    fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("a node's log");
        let child = Command::new(&self.server)
            .arg("-c")
            .arg(&node.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        node.process = Some(child);
    }

    /// Waits until node `i` takes connections and its JetStream answers; says why not, with
    /// what the nodes logged, when the node exits or the wait times out.
    async fn ready(&mut self, i: usize) -> Result<(), String> {
        let url = self.url(i);
        let name = self.nodes[i].name.clone();
        let outcome = poll(Duration::from_millis(20), async || {
            let exited = self.nodes[i]
                .process
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if let Some(status) = exited {
                return Some(Err(format!("nats-server {name} exited ({status})")));
            }
            use futures::StreamExt;
            let client = self.client_as("daemon", &url).await?;
            let js = async_nats::jetstream::new(client);
            // Listing the streams needs the cluster's meta leader; an answer, even an empty
            // list, means JetStream is up. (Account info would do as well, but a 2.9
            // server's answer does not parse in this client.)
            match js.stream_names().next().await {
                None | Some(Ok(_)) => Some(Ok(())),
                Some(Err(_)) => None,
            }
        })
        .await
        .unwrap_or_else(|| Err(format!("timed out waiting for JetStream on {name}")));
        outcome.map_err(|why| {
            let logs: Vec<String> = (0..self.nodes.len())
                .map(|n| format!("--- {} logged:\n{}", self.nodes[n].name, self.log(n)))
                .collect();
            format!("{why}\n{}", logs.join("\n"))
        })
    }

    /// The client URL of node `i`.
    pub fn url(&self, i: usize) -> String {
        let scheme = if self.tls_ca.is_some() { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.nodes[i].client_port)
    }

    /// The certificate of the CA the nodes' certificates come from, when they speak TLS.
    pub fn tls_ca(&self) -> Option<&Path> {
        self.tls_ca.as_deref()
    }

    /// Every node's client URL.
    pub fn urls(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.url(i)).collect()
    }

    /// Kills node `i` with `SIGKILL` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` again, on its ports and folder, and waits until it answers.
    pub async fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        if let Err(why) = self.ready(i).await {
            panic!("{why}");
        }
    }

    /// What node `i` logged, for a failing test's message.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default()
    }

    /// The file holding the token the nodes ask for, when they ask for one.
    pub fn token_file(&self) -> Option<&Path> {
        match &self.login {
            Login::Token(_, file) => Some(file),
            _ => None,
        }
    }

    /// The seed file of `user`'s NATS nkey (`daemon` or one of [`WORKERS`]), when the nodes
    /// take nkey users.
    pub fn nats_nkey_file(&self, user: &str) -> Option<PathBuf> {
        matches!(self.login, Login::Users).then(|| key(self.dir(), &format!("nats-{user}")).0)
    }

    /// A client of node `url` logged in as `user` (`daemon` or one of [`WORKERS`]) would be,
    /// or `None` when the node does not take it.
    pub async fn client_as(&self, user: &str, url: &str) -> Option<async_nats::Client> {
        let options = match &self.login {
            Login::Token(token, _) => async_nats::ConnectOptions::with_token(token.clone()),
            Login::Users => {
                let file = self.nats_nkey_file(user)?;
                let seed = std::fs::read_to_string(file).ok()?;
                async_nats::ConnectOptions::with_nkey(seed.trim().to_owned())
            }
            Login::Anyone => async_nats::ConnectOptions::new(),
        };
        let options = match &self.tls_ca {
            Some(ca) => options.add_root_certificates(ca.clone()).require_tls(true),
            None => options,
        };
        options.connect(url).await.ok()
    }

    /// The seed file of the signing key of `who`: `daemon` or one of [`WORKERS`], and its
    /// public key.
    pub fn key_file(&self, who: &str) -> (PathBuf, String) {
        key(self.dir(), who)
    }

    /// The flags of `catalyst worker` named `name` for this cluster: how it logs in, the
    /// daemon's key and its own.
    pub fn worker_args(&self, name: &str) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(token) = self.token_file() {
            args.extend(["--nats-token-file".into(), token.into()]);
        }
        if let Some(nkey) = self.nats_nkey_file(name) {
            args.extend(["--nats-nkey".into(), nkey.into()]);
        }
        if let Some(ca) = self.tls_ca() {
            args.extend(["--tls-ca".into(), ca.into()]);
        }
        let (_, daemon) = self.key_file("daemon");
        let (own, _) = self.key_file(name);
        args.extend([
            "--daemon-key".into(),
            daemon.into(),
            "--key-file".into(),
            own.into(),
        ]);
        args
    }

    /// The folder holding the nodes' configs, logs and JetStream data.
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// The `[cluster]` config of a daemon on this cluster sharing `remote`, with the lease
    /// `lease_secs`.
    pub fn config_for(&self, remote: &Path, lease_secs: u64) -> String {
        let urls: Vec<String> = self.urls().iter().map(|u| format!("{u:?}")).collect();
        let mut login = self
            .token_file()
            .map(|f| format!("token_file = {:?}\n", f.display().to_string()))
            .unwrap_or_default();
        if let Some(nkey) = self.nats_nkey_file("daemon") {
            login.push_str(&format!("nkey_file = {:?}\n", nkey.display().to_string()));
        }
        if let Some(ca) = self.tls_ca() {
            login.push_str(&format!("tls_ca_file = {:?}\n", ca.display().to_string()));
        }
        let (key_file, _) = self.key_file("daemon");
        let workers: Vec<String> = WORKERS
            .iter()
            .map(|w| format!("{w} = {:?}", self.key_file(w).1))
            .collect();
        format!(
            "[cluster]\nnats = [{}]\nremote = {:?}\nlease_secs = {lease_secs}\n{login}\
             key_file = {:?}\nworkers = {{ {} }}\n",
            urls.join(", "),
            remote.display().to_string(),
            key_file.display().to_string(),
            workers.join(", ")
        )
    }
}

/// A bare repository holding the workspace's `main`: the remote the daemon and its workers
/// share.
pub fn shared_remote(ws: &Workspace) -> PathBuf {
    let remote = ws.root.join("remote.git");
    let run = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&ws.root, &["init", "--quiet", "--bare", "remote.git"]);
    run(
        &ws.repo,
        &["push", "--quiet", remote.to_str().expect("utf-8"), "main"],
    );
    remote
}

/// A `catalyst worker` process (killed when dropped), logging to `<root>/<name>.log`.
pub struct WorkerProcess {
    pub name: String,
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl WorkerProcess {
    /// What the worker logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `catalyst worker` for `ws`'s daemon on `cluster`, named `name`, with `slots` slots, its
/// work folder `<root>/<name>`.
pub fn start_worker(
    ws: &Workspace,
    cluster: &NatsCluster,
    remote: &Path,
    name: &str,
    slots: usize,
) -> WorkerProcess {
    start_worker_with_path(ws, cluster, remote, (name, slots), None)
}

/// [`start_worker`] with its `PATH` set to `path` (a machine without some program).
pub fn start_worker_with_path(
    ws: &Workspace,
    cluster: &NatsCluster,
    remote: &Path,
    (name, slots): (&str, usize),
    path: Option<&Path>,
) -> WorkerProcess {
    let log = ws.root.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("worker log");
    let mut command = Command::new(crate::catalyst_bin());
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.arg("worker").args(cluster.worker_args(name));
    // The daemon's profiles (its config holds the stub's): an order names one.
    command.arg("--profiles").arg(ws.paths.config());
    if !crate::sandboxed() {
        command.arg("--allow-unconfined");
    }
    let child = command
        .arg("--nats")
        .arg(cluster.urls().join(","))
        .arg("--repo")
        .arg(remote)
        .arg("--workdir")
        .arg(ws.root.join(name))
        .args(["--slots", &slots.to_string(), "--name", name])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start catalyst worker");
    WorkerProcess {
        name: name.to_owned(),
        child,
        log,
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}
