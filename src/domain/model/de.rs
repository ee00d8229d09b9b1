//! Hand-written deserializers for [`Bead`] and [`Dependency`]: known fields go straight into
//! their slots and unknown ones into `extra`, in one pass over the map. (`#[serde(flatten)]`
//! would buffer the whole object first.) Missing optional fields get the same defaults as the
//! derived `Serialize` omits; a missing required field is an error naming it.
//!
//! A bead's structured fields (`metadata`, `labels`, `dependencies`, `comments`) may also come
//! as a string holding their JSON, as Gas Town's backups write the beads database's rows: see
//! [`Encoded`].

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess};
use serde::de::{SeqAccess, Visitor};
use serde_json::Value;

use super::{default_issue_type, default_priority, Bead, Dependency, JsonMap};

/// A field that is absent when its value is: `metadata` (`Option`) or a list (`Vec`, empty).
trait Slot: Sized {
    /// What the JSON holds when the field is there.
    type Present: DeserializeOwned;
    fn from_read(value: Option<Self::Present>) -> Self;
}

impl<T: DeserializeOwned> Slot for Option<T> {
    type Present = T;
    fn from_read(value: Option<T>) -> Self {
        value
    }
}

impl<T: DeserializeOwned> Slot for Vec<T> {
    type Present = Vec<T>;
    fn from_read(value: Option<Vec<T>>) -> Self {
        value.unwrap_or_default()
    }
}

/// Reads a structured field either as its JSON value or as a string holding that JSON.
///
/// Gas Town backs a beads database up as its rows (`SELECT *`, printed by `dolt sql -r json`),
/// and the database's JSON columns come out as strings: `"metadata":"{\"k\":1}"`. Such a
/// string is decoded as the field's own shape; an empty one, or JSON `null`, is the field's
/// absence. A string that is not JSON of that shape refuses the line, naming the field. Any
/// other value is read in place, without buffering it (this is also the journal's path).
struct Encoded<S> {
    field: &'static str,
    slot: PhantomData<S>,
}

impl<S> Encoded<S> {
    fn new(field: &'static str) -> Self {
        Encoded {
            field,
            slot: PhantomData,
        }
    }
}

impl<'de, S: Slot> DeserializeSeed<'de> for Encoded<S> {
    type Value = S;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Slot> Visitor<'de> for Encoded<S> {
    type Value = S;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "`{}` as JSON, or a string holding its JSON", self.field)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<S, E> {
        if v.trim().is_empty() {
            return Ok(S::from_read(None));
        }
        serde_json::from_str::<Option<S::Present>>(v)
            .map(S::from_read)
            .map_err(|e| {
                E::custom(format_args!(
                    "`{}` is a string that does not hold its JSON: {e}",
                    self.field
                ))
            })
    }

    fn visit_unit<E: de::Error>(self) -> Result<S, E> {
        Ok(S::from_read(None))
    }

    fn visit_none<E: de::Error>(self) -> Result<S, E> {
        Ok(S::from_read(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<S, A::Error> {
        S::Present::deserialize(MapAccessDeserializer::new(map)).map(|v| S::from_read(Some(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<S, A::Error> {
        S::Present::deserialize(SeqAccessDeserializer::new(seq)).map(|v| S::from_read(Some(v)))
    }
}

/// Implements `Deserialize` for a struct read from a JSON object: `$req` fields must be
/// present, `$opt` fields default, `$enc` fields default too and may be string-encoded
/// ([`Encoded`]), anything else lands in `extra`.
macro_rules! object {
    ($ty:ident, $name:literal, req { $($req:ident),* }, opt { $($opt:ident = $default:expr),* },
     enc { $($enc:ident = $edefault:expr),* }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[allow(non_camel_case_types)]
                enum Field {
                    $($req,)*
                    $($opt,)*
                    $($enc,)*
                    Other(String),
                }
                impl<'de> Deserialize<'de> for Field {
                    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                        struct Names;
                        impl Visitor<'_> for Names {
                            type Value = Field;
                            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                                f.write_str("a field name")
                            }
                            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                                Ok(match v {
                                    $(stringify!($req) => Field::$req,)*
                                    $(stringify!($opt) => Field::$opt,)*
                                    $(stringify!($enc) => Field::$enc,)*
                                    other => Field::Other(other.to_owned()),
                                })
                            }
                        }
                        d.deserialize_identifier(Names)
                    }
                }
                struct Fields;
                impl<'de> Visitor<'de> for Fields {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($name)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
                        $(let mut $req = None;)*
                        $(let mut $opt = None;)*
                        $(let mut $enc = None;)*
                        let mut extra = JsonMap::new();
                        while let Some(field) = map.next_key::<Field>()? {
                            match field {
                                $(Field::$req => $req = Some(map.next_value()?),)*
                                $(Field::$opt => $opt = Some(map.next_value()?),)*
                                $(Field::$enc => {
                                    $enc = Some(map.next_value_seed(Encoded::new(stringify!($enc)))?);
                                })*
                                Field::Other(key) => {
                                    extra.insert(key, map.next_value::<Value>()?);
                                }
                            }
                        }
                        Ok($ty {
                            $($req: $req.ok_or_else(|| de::Error::missing_field(stringify!($req)))?,)*
                            $($opt: $opt.unwrap_or_else(|| $default),)*
                            $($enc: $enc.unwrap_or_else(|| $edefault),)*
                            extra,
                        })
                    }
                }
                d.deserialize_map(Fields)
            }
        }
    };
}

object!(
    Bead,
    "a bead",
    req { id, title, status, created_at, updated_at },
    opt {
        description = None,
        design = None,
        acceptance_criteria = None,
        notes = None,
        priority = default_priority(),
        issue_type = default_issue_type(),
        assignee = None,
        started_at = None,
        closed_at = None,
        close_reason = None,
        defer_until = None
    },
    enc {
        labels = Vec::new(),
        metadata = None,
        dependencies = Vec::new(),
        comments = Vec::new()
    }
);

/// `type` is a keyword, so the dependency's fields are spelled out by hand.
impl<'de> Deserialize<'de> for Dependency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Dependency;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a dependency")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Dependency, A::Error> {
                let (mut issue_id, mut depends_on_id, mut dep_type) = (None, None, None);
                let (mut created_at, mut created_by) = (None, None);
                let mut extra = JsonMap::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "issue_id" => issue_id = Some(map.next_value()?),
                        "depends_on_id" => depends_on_id = Some(map.next_value()?),
                        "type" => dep_type = Some(map.next_value()?),
                        "created_at" => created_at = map.next_value()?,
                        "created_by" => created_by = map.next_value()?,
                        _ => {
                            extra.insert(key.into_owned(), map.next_value::<Value>()?);
                        }
                    }
                }
                Ok(Dependency {
                    issue_id: issue_id.ok_or_else(|| de::Error::missing_field("issue_id"))?,
                    depends_on_id: depends_on_id
                        .ok_or_else(|| de::Error::missing_field("depends_on_id"))?,
                    dep_type: dep_type.ok_or_else(|| de::Error::missing_field("type"))?,
                    created_at,
                    created_by,
                    extra,
                })
            }
        }
        d.deserialize_map(Fields)
    }
}
