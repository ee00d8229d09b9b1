//! Who may say what in a cluster: every message is [`Signed`] with an Ed25519 key (an nkey,
//! as NATS itself uses). The daemon signs orders and cancels, and a worker takes them only
//! under the daemon's public key (`--daemon-key`); each worker signs its leases, ends and
//! presence, and the daemon takes them only from the workers `[cluster] workers` lists, under
//! the key listed for the name the message carries. What a message may then do (an end only
//! from the worker that holds the attempt's lease) is the receiver's to check.
//!
//! A key lives in a file holding its seed (`SU…`, one line), readable by its owner only; a
//! missing file is made with a new key, so a first start needs no step of its own, and
//! `catalyst cluster-key FILE` prints the public key to give to the other side.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use nkeys::KeyPair;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::domain::cluster::{Kind, Signed};

/// Why a key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the key file `{path}`: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("cannot make the key file `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{key}` is not an nkey user's public key: {detail}")]
    Public { key: String, detail: String },
}

/// Why a message is not taken. Its `Display` is what the refusal records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not signed: {0}")]
    NotSigned(String),
    #[error("its signature does not check out under its key `{0}`")]
    BadSignature(String),
    #[error("signed, but does not read as a {kind}: {detail}")]
    Body { kind: &'static str, detail: String },
    #[error("signed by `{key}`, which is not the daemon's key")]
    NotTheDaemon { key: String },
    #[error("from `{worker}`, which `cluster.workers` does not list")]
    Unlisted { worker: String },
    #[error("says it is from `{worker}` but is signed by `{key}`, which is not its key")]
    WrongKey { worker: String, key: String },
    #[error("from `{worker}` but sent on the subject `{subject}` of another")]
    WrongSubject { worker: String, subject: String },
    #[error("from `{worker}`, which does not hold the lease of `{dispatch}` ({holder} does)")]
    NotTheHolder {
        worker: String,
        dispatch: String,
        holder: String,
    },
}

impl Refusal {
    /// The kind of refusal, whatever its details.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotSigned(_) => "not-signed",
            Refusal::BadSignature(_) => "bad-signature",
            Refusal::Body { .. } => "body",
            Refusal::NotTheDaemon { .. } => "not-the-daemon",
            Refusal::Unlisted { .. } => "unlisted",
            Refusal::WrongKey { .. } => "wrong-key",
            Refusal::WrongSubject { .. } => "wrong-subject",
            Refusal::NotTheHolder { .. } => "not-the-holder",
        }
    }
}

/// A key pair of this side, from its seed file.
pub struct Signer {
    pair: KeyPair,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({})", self.pair.public_key())
    }
}

impl Signer {
    /// The key whose seed is in `path`, made (readable by its owner only) when the file does
    /// not exist; Ok(true) with it when it was made.
    pub fn load_or_make(path: &Path) -> Result<(Signer, bool), KeyError> {
        let read_failed = |detail: String| KeyError::Read {
            path: path.to_owned(),
            detail,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let seed = text.lines().next().map(str::trim).unwrap_or_default();
                let pair = KeyPair::from_seed(seed)
                    .map_err(|e| read_failed(format!("not an nkey seed: {e}")))?;
                Ok((Signer { pair }, false))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let pair = KeyPair::new_user();
                let seed = pair
                    .seed()
                    .map_err(|e| read_failed(format!("cannot encode a new seed: {e}")))?;
                write_secret(path, &seed).map_err(|source| KeyError::Write {
                    path: path.to_owned(),
                    source,
                })?;
                Ok((Signer { pair }, true))
            }
            Err(e) => Err(read_failed(e.to_string())),
        }
    }

    /// A key made now, kept nowhere (for tests).
    pub fn new() -> Signer {
        Signer {
            pair: KeyPair::new_user(),
        }
    }

    /// The public key, to give to the other side (`U…`).
    pub fn public_key(&self) -> String {
        self.pair.public_key()
    }

    /// `value` as a signed message of `kind`, ready to publish.
    pub fn seal<T: Serialize>(&self, kind: Kind, value: &T) -> Vec<u8> {
        serde_json::to_vec(&self.sign(kind, value)).unwrap_or_default()
    }

    /// `value` signed as a message of `kind`.
    pub fn sign<T: Serialize>(&self, kind: Kind, value: &T) -> Signed {
        let body = serde_json::to_string(value).unwrap_or_default();
        let sig = self
            .pair
            .sign(&kind.signed_bytes(&body))
            .map(|s| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s))
            .unwrap_or_default();
        Signed {
            key: self.pair.public_key(),
            sig,
            body,
        }
    }
}

impl Default for Signer {
    fn default() -> Self {
        Signer::new()
    }
}

/// Writes `seed` to a new file at `path`, readable and writable by its owner only.
fn write_secret(path: &Path, seed: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{seed}")
}

/// A public key to check signatures with.
#[derive(Clone)]
pub struct Verifier {
    pair: std::sync::Arc<KeyPair>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Verifier({})", self.pair.public_key())
    }
}

impl Verifier {
    /// The public key `key` (`U…`).
    pub fn new(key: &str) -> Result<Verifier, KeyError> {
        let pair = KeyPair::from_public_key(key.trim()).map_err(|e| KeyError::Public {
            key: key.to_owned(),
            detail: e.to_string(),
        })?;
        if !pair.public_key().starts_with('U') {
            return Err(KeyError::Public {
                key: key.to_owned(),
                detail: "a user's key starts with `U`".into(),
            });
        }
        Ok(Verifier {
            pair: std::sync::Arc::new(pair),
        })
    }

    pub fn public_key(&self) -> String {
        self.pair.public_key()
    }
}

/// A signed message whose signature checks out under the key it names, read as a `T`: who
/// signed it, and what it says. The caller decides whether that key may say it.
pub fn open<T: DeserializeOwned>(payload: &[u8], kind: Kind) -> Result<(String, T), Refusal> {
    let signed: Signed =
        serde_json::from_slice(payload).map_err(|e| Refusal::NotSigned(short(&e.to_string())))?;
    let bad = || Refusal::BadSignature(signed.key.clone());
    let verifier = Verifier::new(&signed.key).map_err(|_| bad())?;
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&signed.sig)
        .map_err(|_| bad())?;
    verifier
        .pair
        .verify(&kind.signed_bytes(&signed.body), &sig)
        .map_err(|_| bad())?;
    let value = serde_json::from_str(&signed.body).map_err(|e| Refusal::Body {
        kind: kind.as_str(),
        detail: short(&e.to_string()),
    })?;
    Ok((signed.key, value))
}

/// A message signed by `by` only: [`open`], then the key checked.
pub fn open_from<T: DeserializeOwned>(
    payload: &[u8],
    kind: Kind,
    by: &Verifier,
) -> Result<T, Refusal> {
    let (key, value) = open(payload, kind)?;
    if key != by.public_key() {
        return Err(Refusal::NotTheDaemon { key });
    }
    Ok(value)
}

/// `text` cut to one short line, for a refusal's record.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cluster::Lease;

    fn lease() -> Lease {
        Lease {
            dispatch: "d-1".into(),
            worker: "w1".into(),
            seq: 1,
        }
    }

    #[test]
    fn a_message_opens_under_its_own_key_only_as_the_kind_it_was_signed_as() {
        let w1 = Signer::new();
        let sealed = w1.seal(Kind::Lease, &lease());
        let (key, back): (String, Lease) = open(&sealed, Kind::Lease).expect("opens");
        assert_eq!((key, back), (w1.public_key(), lease()));
        // The same signature does not pass for another kind of message.
        let as_end = open::<Lease>(&sealed, Kind::End).unwrap_err();
        assert!(matches!(as_end, Refusal::BadSignature(_)), "{as_end}");
        // Nor for another body, nor under another key.
        let mut signed: Signed = serde_json::from_slice(&sealed).expect("json");
        signed.body = signed.body.replace("d-1", "d-2");
        let changed = serde_json::to_vec(&signed).expect("json");
        assert!(matches!(
            open::<Lease>(&changed, Kind::Lease),
            Err(Refusal::BadSignature(_))
        ));
        let mut signed: Signed = serde_json::from_slice(&sealed).expect("json");
        signed.key = Signer::new().public_key();
        let rekeyed = serde_json::to_vec(&signed).expect("json");
        assert!(matches!(
            open::<Lease>(&rekeyed, Kind::Lease),
            Err(Refusal::BadSignature(_))
        ));
        // A bare message is not signed.
        let bare = serde_json::to_vec(&lease()).expect("json");
        assert!(matches!(
            open::<Lease>(&bare, Kind::Lease),
            Err(Refusal::NotSigned(_))
        ));
        // From the daemon only.
        let daemon = Signer::new();
        let verifier = Verifier::new(&daemon.public_key()).expect("a key");
        assert!(
            open_from::<Lease>(&daemon.seal(Kind::Lease, &lease()), Kind::Lease, &verifier).is_ok()
        );
        assert!(matches!(
            open_from::<Lease>(&sealed, Kind::Lease, &verifier),
            Err(Refusal::NotTheDaemon { .. })
        ));
    }

    #[test]
    fn a_key_file_is_made_once_for_its_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("keys").join("cluster.nk");
        let (made, new) = Signer::load_or_make(&path).expect("made");
        assert!(new);
        let mode = std::fs::metadata(&path)
            .expect("the file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (read, new) = Signer::load_or_make(&path).expect("read");
        assert!(!new);
        assert_eq!(read.public_key(), made.public_key());
        std::fs::write(&path, "not a seed\n").expect("write");
        let err = Signer::load_or_make(&path).unwrap_err().to_string();
        assert!(
            err.contains("cluster.nk") && err.contains("not an nkey seed"),
            "{err}"
        );
        assert!(Verifier::new("UNOTAKEY").is_err());
    }
}
