//! launchd: a LaunchAgent per workspace, `~/Library/LaunchAgents/<label>.plist`.

use super::{shell_quote, Rendered, Spec};

const PLIST: &str = include_str!("../../../contrib/launchd/dev.catalyst.catalystd.plist");

pub(super) fn render(spec: &Spec) -> Rendered {
    let label = format!("dev.catalyst.catalystd.{}", spec.slug());
    let dir = spec
        .unit_dir
        .clone()
        .unwrap_or_else(|| spec.home.join("Library").join("LaunchAgents"));
    let log = spec
        .home
        .join("Library")
        .join("Logs")
        .join(format!("catalystd-{}.log", spec.slug()));
    // The template's comment explains the placeholders; the installed file needs none of it.
    let body = match (PLIST.find("<!--"), PLIST.find("-->")) {
        (Some(start), Some(end)) => format!("{}{}", &PLIST[..start], PLIST[end + 3..].trim_start()),
        _ => PLIST.to_owned(),
    };
    let text = body
        .replace("@LABEL@", &xml(&label))
        .replace("@CATALYSTD@", &xml(&spec.catalystd.to_string_lossy()))
        .replace("@WORKSPACE@", &xml(&spec.workspace.to_string_lossy()))
        .replace("@LOG@", &xml(&log.to_string_lossy()))
        .replace("@PATH@", &xml(&spec.path_env));
    let file = dir.join(format!("{label}.plist"));
    let quoted = shell_quote(&file.to_string_lossy());
    Rendered {
        enable: format!("launchctl bootstrap gui/$(id -u) {quoted}"),
        disable: format!("launchctl bootout gui/$(id -u)/{label}"),
        file,
        text,
        enabled_links: Vec::new(),
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
