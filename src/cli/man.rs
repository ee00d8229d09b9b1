//! The man pages: clap's own (name, synopsis, options, subcommands), and the sections a man
//! page reader expects that clap does not write: FILES, ENVIRONMENT, EXIT STATUS, SEE ALSO.

use std::io;
use std::path::Path;

/// Which program a page is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    Catalyst,
    Catalystd,
}

/// The files, relative to the workspace, both programs read or write.
const FILES: &[(&str, &str)] = &[
    (".catalyst/config.toml", "the daemon's config; reloaded when it changes (docs/configuration.md)"),
    (".catalyst/agent_prompts.toml", "prompt templates over the built-in ones"),
    (".catalyst/formulas/, .beads/formulas/", "the workspace's formulas (*.formula.toml)"),
    (".catalyst/journal.jsonl, .catalyst/snapshot.jsonl", "every event the daemon recorded, and the state up to its snapshot"),
    (".catalyst/journal.<seq>.jsonl", "older journal segments, kept by compaction for subscribers replaying from an old event"),
    (".catalyst/catalystd.sock", "the control socket `catalyst ctl` talks to (a short folder under XDG_RUNTIME_DIR or /tmp when the path is too long for a socket)"),
    (".catalyst/catalystd.lock", "held by the running daemon: a second one on the workspace refuses to start"),
    (".catalyst/inbox/, .catalyst/inbox-rejected/", "bead files dropped for the daemon, and those it refused with a .why beside them"),
    (".catalyst/runs/<bead>/<step>/<attempt>/", "each attempt's prompt, context, output and result"),
    (".catalyst/worktrees/<bead>/", "each bead's git worktree, on branch catalyst/<bead>"),
    (".catalyst/web.token", "the web dashboard's token (with [web] listen set)"),
    (".catalyst/cluster.nk", "the daemon's cluster key, made at the first start with [cluster] on (`key_file` puts it elsewhere)"),
    (".catalyst/env", "variables the installed service reads into the daemon's environment (`catalyst service install`)"),
];

/// The environment both programs read.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("RUST_LOG", "the daemon's log filter (e.g. info, catalyst=debug); its log goes to stderr"),
    ("NO_COLOR", "when set, output has no colours"),
    ("XDG_RUNTIME_DIR", "where the control socket goes when the workspace's path is too long for one"),
    ("NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID", "systemd's readiness socket and watchdog: catalystd reports ready, reloading and stopping there, and pings the watchdog while its engine answers"),
    ("TOKIO_WORKER_THREADS", "the daemon's runtime threads, over the number it picks from the CPUs"),
    ("HOME, XDG_CONFIG_HOME, SUDO_USER", "where `catalyst service install` writes a user's service file"),
    ("PATH", "where the agent CLIs (claude, codex), git and bwrap are found; agents get the daemon's environment, with the profile's `env` over it"),
    ("ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL", "read by the agent CLIs, not by catalyst; a pause for an unreachable API names the base URL, and a sandboxed agent may reach the base URL's host"),
    ("CATALYST_SOCKET, CATALYST_BEAD, CATALYST_STEP, CATALYST_ROLE, CATALYST_CONTEXT", "set by the daemon for each agent attempt (a gate's commands get the bead, step and role): the attempt's socket, the work bead, the step, its role and its context file; `catalyst hook`, which the agent CLI's hooks run, reads them to ask the daemon"),
];

fn exit_status(program: Program) -> &'static [(&'static str, &'static str)] {
    match program {
        Program::Catalyst => &[
            ("0", "done"),
            ("1", "the daemon refused the request (not_found, conflict, bad_request, …), or `formula check` and `result parse` found problems"),
            ("2", "a usage error, the daemon could not be reached, or something failed on this side (reading a file, the repository)"),
        ],
        Program::Catalystd => &[
            ("0", "stopped cleanly (SIGTERM, SIGINT or `catalyst ctl shutdown`)"),
            ("1", "did not start, or stopped on an error: another daemon holds the workspace, a config, prompts or formula it cannot load, or a state folder, journal, socket, web listener or cluster it cannot use"),
            ("2", "a usage error, a workspace that does not exist, or an async runtime that could not start"),
        ],
    }
}

fn see_also(program: Program) -> &'static str {
    match program {
        Program::Catalyst => "catalystd(1), git(1), bwrap(1), systemctl(1)",
        Program::Catalystd => "catalyst(1), systemd.service(5), launchd.plist(5), bwrap(1)",
    }
}

/// The page of `command` for `program`: clap's sections, then catalyst's own.
pub fn page(command: clap::Command, program: Program) -> io::Result<Vec<u8>> {
    let mut text = Vec::new();
    clap_mangen::Man::new(command).render(&mut text)?;
    text.extend_from_slice(sections(program).as_bytes());
    Ok(text)
}

/// Writes every page into `dir`: `catalyst.1` and one `catalyst-<command>.1` per subcommand,
/// and `catalystd.1`, the two main pages with catalyst's own sections.
pub fn write_all(catalyst: clap::Command, catalystd: clap::Command, dir: &Path) -> io::Result<()> {
    for (command, program) in [
        (catalyst, Program::Catalyst),
        (catalystd, Program::Catalystd),
    ] {
        let name = command.get_name().to_owned();
        clap_mangen::generate_to(command.clone(), dir)?;
        std::fs::write(dir.join(format!("{name}.1")), page(command, program)?)?;
    }
    Ok(())
}

/// FILES, ENVIRONMENT, EXIT STATUS and SEE ALSO, in roff.
fn sections(program: Program) -> String {
    let mut out = String::new();
    let mut list = |title: &str, items: &[(&str, &str)]| {
        out.push_str(&format!(".SH {title}\n"));
        for (term, what) in items {
            out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(term), roff(what)));
        }
    };
    list("FILES", FILES);
    list("ENVIRONMENT", ENVIRONMENT);
    list("EXIT STATUS", exit_status(program));
    out.push_str(&format!(".SH \"SEE ALSO\"\n{}\n", roff(see_also(program))));
    out
}

/// `text` safe in a roff line: backslashes and hyphens escaped, no line starting with a dot
/// or a quote.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.chars().next() {
        Some('.' | '\'') => format!("\\&{escaped}"),
        _ => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_pages_have_files_environment_exit_status_and_see_also() {
        for (program, name) in [
            (Program::Catalyst, "catalyst"),
            (Program::Catalystd, "catalystd"),
        ] {
            let command = clap::Command::new(name).about("a program");
            let text = String::from_utf8(page(command, program).expect("render")).expect("utf-8");
            for section in [
                ".SH FILES",
                ".SH ENVIRONMENT",
                ".SH EXIT STATUS",
                ".SH \"SEE ALSO\"",
            ] {
                assert!(text.contains(section), "{name}: {section} in\n{text}");
            }
            assert!(text.contains("\\fB\\&.catalyst/config.toml\\fR"), "{text}");
            assert!(text.contains("\\fBRUST_LOG\\fR"), "{text}");
            assert!(text.contains("\\fB2\\fR"), "{text}");
        }
    }

    /// The FILES section is written by hand; it must name the paths the daemon really uses,
    /// so a renamed file shows here.
    #[test]
    fn files_are_the_paths_the_daemon_uses() {
        use crate::daemon::{store, Paths, CLUSTER_KEY_FILE};
        let text = String::from_utf8(
            page(clap::Command::new("catalystd"), Program::Catalystd).expect("render"),
        )
        .expect("utf-8");
        let files = text
            .split(".SH FILES")
            .nth(1)
            .and_then(|rest| rest.split(".SH ENVIRONMENT").next())
            .expect("a FILES section");
        let paths = Paths::new(Path::new(""));
        let state = &paths.state;
        let real = [
            paths.config(),
            paths.prompts(),
            paths.inbox(),
            paths.rejected(),
            paths.runs(),
            paths.worktrees(),
            paths.lock(),
            paths.web_token(),
            paths.socket(),
            state.join(store::JOURNAL_FILE),
            state.join(store::SNAPSHOT_FILE),
            state.join(CLUSTER_KEY_FILE),
        ];
        for path in real.iter().chain(&paths.formula_dirs()) {
            let shown = path.display().to_string().replace('-', "\\-");
            assert!(files.contains(&shown), "{shown} in\n{files}");
        }
    }

    #[test]
    fn the_environment_names_every_variable_catalyst_reads_or_sets() {
        let text = String::from_utf8(
            page(clap::Command::new("catalyst"), Program::Catalyst).expect("render"),
        )
        .expect("utf-8");
        for name in [
            "RUST_LOG",
            "NO_COLOR",
            "XDG_RUNTIME_DIR",
            "NOTIFY_SOCKET",
            "TOKIO_WORKER_THREADS",
            "SUDO_USER",
            "ANTHROPIC_BASE_URL",
            "CATALYST_SOCKET",
            "CATALYST_CONTEXT",
        ] {
            assert!(text.contains(name), "{name}");
        }
    }

    #[test]
    fn roff_text_cannot_start_a_request_or_lose_a_hyphen() {
        assert_eq!(roff(".catalyst/x"), "\\&.catalyst/x");
        assert_eq!(roff("a-b \\ c"), "a\\-b \\e c");
    }
}
