//! Beads, their statuses, dependencies and comments, in the beads tracker's JSON shapes, and the
//! roles of molecule steps.
//!
//! Field names and JSON shapes are those of beads exports so that `bd` files can be read and
//! written back. Fields catalyst does not know are kept in `extra` and written back unchanged.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::domain::id::{BeadId, DepTarget};
use crate::domain::time::Timestamp;

/// A JSON object, as `metadata` and the unknown fields of a bead are.
pub type JsonMap = Map<String, Value>;

/// A bead's status. The five statuses catalyst acts on have variants; `pinned`, `hooked` and any
/// custom value are kept as read and never dispatched.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Open,
    InProgress,
    Blocked,
    Deferred,
    Closed,
    Other(String),
}

impl Status {
    pub fn as_str(&self) -> &str {
        match self {
            Status::Open => "open",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Deferred => "deferred",
            Status::Closed => "closed",
            Status::Other(s) => s,
        }
    }

    pub fn parse(s: &str) -> Status {
        match s {
            "open" => Status::Open,
            "in_progress" => Status::InProgress,
            "blocked" => Status::Blocked,
            "deferred" => Status::Deferred,
            "closed" => Status::Closed,
            other => Status::Other(other.to_owned()),
        }
    }

    pub fn is_closed(&self) -> bool {
        *self == Status::Closed
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Status::parse(&s))
    }
}

/// The type of a dependency edge. Only `blocks` and `conditional-blocks` hold a bead back;
/// `parent-child` carries blockedness from parent to child (as `bd ready` does).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DepType {
    Blocks,
    ConditionalBlocks,
    ParentChild,
    Related,
    DiscoveredFrom,
    Other(String),
}

impl DepType {
    pub fn as_str(&self) -> &str {
        match self {
            DepType::Blocks => "blocks",
            DepType::ConditionalBlocks => "conditional-blocks",
            DepType::ParentChild => "parent-child",
            DepType::Related => "related",
            DepType::DiscoveredFrom => "discovered-from",
            DepType::Other(s) => s,
        }
    }

    pub fn parse(s: &str) -> DepType {
        match s {
            "blocks" => DepType::Blocks,
            "conditional-blocks" => DepType::ConditionalBlocks,
            "parent-child" => DepType::ParentChild,
            "related" => DepType::Related,
            "discovered-from" => DepType::DiscoveredFrom,
            other => DepType::Other(other.to_owned()),
        }
    }

    /// Whether an open target of this edge keeps the source from being ready.
    pub fn is_blocking(&self) -> bool {
        matches!(self, DepType::Blocks | DepType::ConditionalBlocks)
    }
}

impl Serialize for DepType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DepType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(DepType::parse(&s))
    }
}

/// `issue_id` depends on `depends_on_id`, a bead or an issue of another project. Deserialized
/// by hand, like [`Bead`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dependency {
    pub issue_id: BeadId,
    pub depends_on_id: DepTarget,
    #[serde(rename = "type")]
    pub dep_type: DepType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl Dependency {
    pub fn new(issue_id: BeadId, depends_on_id: BeadId, dep_type: DepType, at: Timestamp) -> Self {
        Dependency {
            issue_id,
            depends_on_id: DepTarget::Bead(depends_on_id),
            dep_type,
            created_at: Some(at),
            created_by: Some("catalyst".into()),
            extra: JsonMap::new(),
        }
    }
}

/// Comment ids are integers in older beads exports and strings in newer ones; both are kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CommentId {
    Int(i64),
    Str(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comment {
    pub id: CommentId,
    pub issue_id: BeadId,
    pub author: String,
    pub text: String,
    pub created_at: Timestamp,
    #[serde(flatten)]
    pub extra: JsonMap,
}

mod de;
mod step;

pub use step::{is_zero, Counters, MergeHold, MergeStrategy, Phase, Role, StepMeta, STEP_META_KEY};

fn default_priority() -> u8 {
    2
}

fn default_issue_type() -> String {
    "task".into()
}

/// A work item in the beads schema.
///
/// Optional text fields are `Option` so that an absent field and an empty one are written back
/// as they were read. Deserialized by hand (see `de.rs`): with `#[serde(flatten)]` serde would
/// buffer every bead once more, which was a quarter of a large journal's replay.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bead {
    pub id: BeadId,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_criteria: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    pub status: Status,
    /// 0–4, 0 highest.
    #[serde(default = "default_priority")]
    pub priority: u8,
    #[serde(default = "default_issue_type")]
    pub issue_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<Comment>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_until: Option<Timestamp>,
    /// Fields catalyst does not know, kept and written back.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// Issue types that are never ready work (as in `bd ready`).
pub const NEVER_READY_TYPES: [&str; 3] = ["molecule", "gate", "message"];

/// The key under a work bead's `metadata` of its formula variables (an object of strings).
pub const VARS_KEY: &str = "formula_vars";

/// The key under a work bead's `metadata` that says a person gave its formula vars (on the
/// control socket), so they may choose a gate's command. The store sets it when the bead is
/// created and takes it off a bead that came any other way (the inbox, an import, a followed
/// beads file), whatever the bead said.
pub const VARS_BY_PERSON_KEY: &str = "formula_vars_by_person";

/// Sets or removes [`VARS_BY_PERSON_KEY`] on a bead entering the store.
pub fn mark_vars_origin(bead: &mut Bead, by_person: bool) {
    let given = bead
        .metadata
        .as_ref()
        .is_some_and(|m| m.contains_key(VARS_KEY));
    match bead.metadata.as_mut() {
        Some(m) if by_person && given => {
            m.insert(VARS_BY_PERSON_KEY.into(), serde_json::Value::Bool(true));
        }
        Some(m) => {
            m.remove(VARS_BY_PERSON_KEY);
        }
        None => {}
    }
}

/// Whether a person gave `bead`'s formula vars ([`VARS_BY_PERSON_KEY`]).
pub fn vars_by_person(bead: &Bead) -> bool {
    bead.metadata
        .as_ref()
        .and_then(|m| m.get(VARS_BY_PERSON_KEY))
        .is_some_and(|v| v == &serde_json::Value::Bool(true))
}

/// Highest priority value accepted (lowest urgency).
pub const MAX_PRIORITY: u8 = 4;

/// The most a bead may hold, as JSON (title, description, notes, metadata, dependencies,
/// together), whatever door it comes in by: the socket, the inbox, the beads file or an
/// import. A comment or an update may be no larger. It keeps each journal line, and each
/// request line that carries one bead, within the protocol's line limit.
pub const MAX_BEAD_BYTES: usize = 512 * 1024;

/// The close reason `cancel` gives a bead: `cancelled`, or `cancelled: <the person's reason>`.
pub const CANCELLED: &str = "cancelled";

/// Whether `reason` is a close reason `cancel` gave ([`CANCELLED`]).
pub fn is_cancel_reason(reason: &str) -> bool {
    reason
        .strip_prefix(CANCELLED)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(": "))
}

impl Bead {
    /// A new open bead with catalyst's defaults.
    pub fn new(id: BeadId, title: impl Into<String>, at: Timestamp) -> Bead {
        Bead {
            id,
            title: title.into(),
            description: None,
            design: None,
            acceptance_criteria: None,
            notes: None,
            status: Status::Open,
            priority: default_priority(),
            issue_type: default_issue_type(),
            assignee: None,
            labels: Vec::new(),
            metadata: None,
            dependencies: Vec::new(),
            comments: Vec::new(),
            created_at: at,
            updated_at: at,
            started_at: None,
            closed_at: None,
            close_reason: None,
            defer_until: None,
            extra: JsonMap::new(),
        }
    }

    /// The formula named by a `formula:<name>` label, if any.
    pub fn formula_label(&self) -> Option<&str> {
        self.labels.iter().find_map(|l| l.strip_prefix("formula:"))
    }

    /// catalyst's step metadata (`metadata.catalyst`), present on the step beads of a molecule.
    pub fn step_meta(&self) -> Option<StepMeta> {
        let value = self.metadata.as_ref()?.get(STEP_META_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Replaces catalyst's step metadata.
    pub fn set_step_meta(&mut self, meta: &StepMeta) {
        let value = serde_json::to_value(meta).unwrap_or(Value::Null);
        self.metadata
            .get_or_insert_with(JsonMap::new)
            .insert(STEP_META_KEY.into(), value);
    }

    /// Whether the bead was closed by `cancel` rather than merged or closed by hand.
    pub fn is_cancelled(&self) -> bool {
        self.status == Status::Closed && self.close_reason.as_deref().is_some_and(is_cancel_reason)
    }

    pub fn is_step(&self) -> bool {
        self.metadata
            .as_ref()
            .is_some_and(|m| m.contains_key(STEP_META_KEY))
    }

    /// The beads this one has a `parent-child` edge to.
    pub fn parents(&self) -> impl Iterator<Item = &BeadId> {
        self.dependencies
            .iter()
            .filter(|d| d.dep_type == DepType::ParentChild)
            .filter_map(|d| d.depends_on_id.bead())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three shapes of docs/data-model.md#beads-export-lines plus a beads 1.3 line (`_type`,
    /// a lease, counts, a string comment id).
    const EXPORT_LINES: [&str; 4] = [
        r#"{"id":"bd-4h3","title":"Add test coverage for the git package","description":"","status":"open","priority":2,"issue_type":"task","created_at":"2025-11-20T21:21:23.497486-05:00","updated_at":"2025-11-20T21:21:23.497486-05:00","dependencies":[{"issue_id":"bd-4h3","depends_on_id":"bd-ge7","type":"blocks","created_at":"2025-11-20T21:21:31.277639-05:00","created_by":"daemon"}]}"#,
        r#"{"id":"bd-5zf0.1","title":"Child of the CRUD epic","status":"closed","priority":2,"issue_type":"task","owner":"dev@example.com","created_at":"2026-01-26T02:02:08Z","created_by":"mayor","updated_at":"2026-01-26T02:02:13Z","closed_at":"2026-01-26T02:02:13Z","close_reason":"Test completed","dependencies":[{"issue_id":"bd-5zf0.1","depends_on_id":"bd-5zf0","type":"parent-child","created_at":"2026-01-25T18:02:07Z","created_by":"mayor"}]}"#,
        r#"{"id":"bd-3kbmj","title":"Issue with labels","status":"closed","priority":1,"issue_type":"feature","created_at":"2026-01-12T02:16:02Z","updated_at":"2026-01-27T03:48:41Z","closed_at":"2026-01-27T03:48:41Z","close_reason":"done","labels":["backend","urgent"],"work_type":"mutex","comments":[{"id":1,"issue_id":"bd-3kbmj","author":"crew/giles","text":"Testing markdown","created_at":"2026-01-12T02:16:51Z"}]}"#,
        r#"{"_type":"issue","id":"bd-9","title":"Newer export","status":"pinned","priority":0,"issue_type":"bug","created_at":"2026-02-01T10:00:00.5+01:00","updated_at":"2026-02-01T10:00:00.5+01:00","lease_expires_at":"2026-02-01T10:30:00+01:00","heartbeat_at":"2026-02-01T10:00:30.25+01:00","dependency_count":0,"dependent_count":3,"comment_count":1,"comments":[{"id":"c-7f","issue_id":"bd-9","author":"a","text":"b","created_at":"2026-02-01T10:00:01Z"}],"metadata":{"k":[1,2]}}"#,
    ];

    #[test]
    fn beads_export_lines_round_trip_unchanged() {
        for line in EXPORT_LINES {
            let bead: Bead = serde_json::from_str(line).unwrap();
            let back = serde_json::to_value(&bead).unwrap();
            let original: Value = serde_json::from_str(line).unwrap();
            assert_eq!(back, original, "round trip changed {line}");
        }
    }

    #[test]
    fn fields_are_typed_after_reading() {
        let b: Bead = serde_json::from_str(EXPORT_LINES[2]).unwrap();
        assert_eq!(b.status, Status::Closed);
        assert_eq!(b.priority, 1);
        assert_eq!(b.comments[0].id, CommentId::Int(1));
        assert_eq!(b.extra.get("work_type"), Some(&Value::from("mutex")));
        let newer: Bead = serde_json::from_str(EXPORT_LINES[3]).unwrap();
        assert_eq!(newer.status, Status::Other("pinned".into()));
        assert_eq!(newer.comments[0].id, CommentId::Str("c-7f".into()));
        let first: Bead = serde_json::from_str(EXPORT_LINES[0]).unwrap();
        assert_eq!(first.dependencies[0].dep_type, DepType::Blocks);
        assert_eq!(first.description.as_deref(), Some(""));
    }

    #[test]
    fn a_bad_id_inside_a_line_is_an_error_naming_it() {
        let line = EXPORT_LINES[0].replace("bd-ge7", "../../etc");
        let err = serde_json::from_str::<Bead>(&line).unwrap_err();
        assert!(err.to_string().contains("../../etc"), "{err}");
    }

    #[test]
    fn step_meta_lives_under_metadata_catalyst() {
        let id = BeadId::new("cat-1.review").unwrap();
        let mut b = Bead::new(
            id.clone(),
            "Review",
            Timestamp::parse("2026-01-26T02:02:08.123456Z").expect("timestamp"),
        );
        assert!(!b.is_step());
        let meta = StepMeta {
            model: Some("haiku".into()),
            formula: Some("feature".into()),
            ..StepMeta::new("review".into(), Role::Review, BeadId::new("cat-1").unwrap())
        };
        let mut m = JsonMap::new();
        m.insert(STEP_META_KEY.into(), serde_json::to_value(&meta).unwrap());
        b.metadata = Some(m);
        assert_eq!(b.step_meta(), Some(meta));
    }

    #[test]
    fn only_the_reasons_cancel_gives_mean_cancelled() {
        for (reason, cancelled) in [
            ("cancelled", true),
            ("cancelled: dropped", true),
            ("cancelledish", false),
            ("merged into `main`", false),
            ("not cancelled", false),
        ] {
            assert_eq!(is_cancel_reason(reason), cancelled, "{reason}");
        }
        let mut b = Bead::new(
            BeadId::new("cat-1").unwrap(),
            "x",
            Timestamp::parse("2026-01-26T02:02:08Z").unwrap(),
        );
        b.close_reason = Some("cancelled: dropped".into());
        assert!(!b.is_cancelled(), "a cancelled bead is closed");
        b.status = Status::Closed;
        assert!(b.is_cancelled());
    }

    #[test]
    fn roles_parse_case_insensitively_and_know_their_models() {
        assert_eq!(Role::parse("Review"), Some(Role::Review));
        assert_eq!(Role::parse("deploy"), None);
        assert_eq!(Role::Review.default_model(), Some("haiku"));
        assert_eq!(Role::Merge.default_model(), Some("opus"));
        assert!(!Role::Gate.is_agent());
    }
}
