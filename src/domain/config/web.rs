//! `[web]`: the dashboard `catalystd` serves over HTTP (docs/web.md). Off unless `listen` is
//! set here or `catalystd --web ADDR` is given; the address itself is checked where it is
//! bound (loopback only unless `allow_remote`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// The address and port to serve on, e.g. `127.0.0.1:7400`. None: no web server.
    pub listen: Option<String>,
    /// Whether `listen` may be an address other than loopback (every page still needs the
    /// token; the traffic is plain HTTP).
    pub allow_remote: bool,
    /// Host names, besides the listening address and `localhost`, that requests may name in
    /// their `Host` header (the name people reach a remote dashboard by).
    pub hosts: Vec<String>,
}
