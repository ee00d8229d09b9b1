//! Hand-written deserializers for [`Bead`] and [`Dependency`]: known fields go straight into
//! their slots and unknown ones into `extra`, in one pass over the map. (`#[serde(flatten)]`
//! would buffer the whole object first.) Missing optional fields get the same defaults as the
//! derived `Serialize` omits; a missing required field is an error naming it.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::{default_issue_type, default_priority, Bead, Dependency, JsonMap};

/// Implements `Deserialize` for a struct read from a JSON object: `$req` fields must be
/// present, `$opt` fields default, anything else lands in `extra`.
macro_rules! object {
    ($ty:ident, $name:literal, req { $($req:ident),* }, opt { $($opt:ident = $default:expr),* }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[allow(non_camel_case_types)]
                enum Field {
                    $($req,)*
                    $($opt,)*
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
                        let mut extra = JsonMap::new();
                        while let Some(field) = map.next_key::<Field>()? {
                            match field {
                                $(Field::$req => $req = Some(map.next_value()?),)*
                                $(Field::$opt => $opt = Some(map.next_value()?),)*
                                Field::Other(key) => {
                                    extra.insert(key, map.next_value::<Value>()?);
                                }
                            }
                        }
                        Ok($ty {
                            $($req: $req.ok_or_else(|| de::Error::missing_field(stringify!($req)))?,)*
                            $($opt: $opt.unwrap_or_else(|| $default),)*
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
        labels = Vec::new(),
        metadata = None,
        dependencies = Vec::new(),
        comments = Vec::new(),
        started_at = None,
        closed_at = None,
        close_reason = None,
        defer_until = None
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
