//! stub-claude: a drop-in `claude` for catalyst's tests and `catalyst demo`.
//!
//! It accepts Claude Code's print-mode command line, reads the prompt from stdin (or a trailing
//! argument; under `--input-format stream-json`, the first user message, with more user
//! messages following as a conversation), and answers in Claude Code's `text`, `json` or `stream-json` output with a final
//! message ending in a `---STEP-RESULT---` block (docs/routing.md). What it answers, and what it does
//! on the way, comes from a scenario file, so a test can script a whole workflow: a review that
//! rejects once then approves, an agent that crashes, floods its output, hits a usage limit or
//! writes outside its worktree through a tool the hooks must deny. It is a library as well as a
//! binary so that catalyst can run it through a hidden subcommand, without a second binary on
//! `PATH`.
//!
//! # Environment
//! - `STUB_CLAUDE_SCENARIO`: the scenario file (TOML, below). Unset: every invocation answers a
//!   valid DONE (APPROVED for a review).
//! - `STUB_CLAUDE_STATE`: where the response counts are kept across processes (default: the
//!   scenario path plus `.state`), per run (below). Delete it to start a scenario over.
//! - `STUB_CLAUDE_LOG`: a JSONL file every invocation appends its events to (`start`, `tool`,
//!   `session_start`, `stop_block`, `follow_up`, `error`, `end`; a refused command line is
//!   logged too); read
//!   it with [`read_log`] or [`invocations`].
//! - `CATALYST_ROLE`, `CATALYST_STEP`, `CATALYST_BEAD`: what the invocation is, as catalyst
//!   sets them; matched by the scenario's rules and recorded in the log.
//! - `CATALYST_CONTEXT`: the step's context file, in `<workspace>/.catalyst/runs/…`; the
//!   workspace it lies in is the invocation's run.
//!
//! # Scenario
//! ```toml
//! [[rule]]
//! role = "review"       # matchers, all optional, `*` is a wildcard: role, step, bead, model
//! step = "review"       # the full step id (`cat-1.review`) or the part after the bead
//! per_bead = false      # true: each bead gets its own count (its own run through the list)
//! unless_exists = "FIXED" # only when this file is not in the worktree (`if_exists`: only when
//!                       # it is): answers that follow the worktree, not a count, stay the same
//!                       # when an interrupted step runs again
//! responses = [
//!   { verdict = "REJECTED", summary = "needs a test", instructions = ["add a test"] },
//!   { verdict = "APPROVED", summary = "looks good" },
//! ]
//! ```
//! The first rule that matches answers. Its responses are used one per invocation, in order,
//! the last one repeating; the count is kept in the state file under an exclusive `flock`, so
//! parallel invocations each take a distinct response. Counts are kept per run: a run is the
//! catalyst workspace the invocation works for (from `CATALYST_CONTEXT`), so two workspaces
//! following one scenario each start at its first response, and a daemon restarted on the
//! same workspace goes on where it stopped. Without `CATALYST_CONTEXT` (the stub run by hand)
//! the state file is one run. A response's keys (all optional):
//! - the block: `status` (default `DONE`), `verdict` (default `APPROVED` for the `review`
//!   role, absent otherwise), `summary`, `instructions` (a list), `text` (prose before the
//!   block); `raw` replaces the whole final message, for malformed output.
//! - the worktree: `write` and `append` (tables of path → content) and `delete` (a list),
//!   relative to the cwd; absolute paths and `..` are refused, since a worktree escape is only
//!   meaningful when it goes through `tools`.
//! - `tools`: a list of `{ name, input }` calls made as Claude Code makes them: refused when the
//!   tool flags (`--tools`, `--disallowedTools`) leave the tool out, else put to the
//!   `PreToolUse` hooks of `--settings`, and performed only when allowed (`Write`, `Edit`,
//!   `Read` and `Bash` really act; other tools do nothing).
//! - `shell`: commands run with `sh -c` in the agent's own process, past the tool flags and
//!   the hooks (what an agent that slipped a tool past the policy could do), each logged as a
//!   `shell` line with its exit code and output.
//! - timing: `sleep_ms`, `wait_for` (a path; block until it exists, at most 60 s).
//! - endings: `exit_code`, `is_error = true` (an error result, exit 1 unless `exit_code`),
//!   `signal` (`"KILL"`, `"SIGTERM"`, `9`: die by it after the response's earlier effects),
//!   `usage_limit` (`true`, or the message to use; see below), `cost_usd`.
//! - noise: `stderr` (text for stderr), `flood_bytes` (filler before the result), `non_utf8 =
//!   true` (invalid UTF-8 before the result), `fake_block_in_tool_result = true` (an earlier
//!   tool result quoting a contradicting result block: only the final message counts),
//!   `fake_block_in_earlier_turn = true` (an earlier assistant turn ending in such a block).
//! - `after_stop_block`: the response acted out when a `Stop` hook blocks the first answer;
//!   its final message replaces the first. Without it, the first answer stands. Stop runs
//!   again with `stop_hook_active: true`, and a second block is ignored. Under `--input-format
//!   stream-json`, a follow-up user message (sent after the `result`) is answered with it
//!   instead, if no Stop hook used it; a follow-up without it gets the last final message
//!   again (see below).
//!
//! A usage limit is reported as Claude Code reports one in print mode: in `stream-json`, a
//! `rate_limit_event` with `rate_limit_info.status = "rejected"` and `resetsAt`, then an
//! assistant message with the limit text; in every format a result with `subtype: "success"`,
//! `is_error: true` and `result: "Claude AI usage limit reached|<epoch seconds of the reset>"`;
//! exit code 1.
//!
//! # Conversations
//! Under `--input-format stream-json`, as with Claude Code, stdin is a conversation: the first
//! user message (`{"type":"user","message":{"role":"user","content":…}}`, content a string or
//! text blocks) is the prompt, and each turn ends with its own `result` event, after which the
//! stub waits for the next user message; the end of stdin ends the session, with the last
//! turn's exit code. Each further message is logged as `follow_up` and answered by one more
//! turn (`after_stop_block`, or the last final message again), whose `result` counts
//! `num_turns` and the cost over the whole session. The `end` line is written once, at the end.
//!
//! # Modules
//! - [`cli`]: Claude Code's command line: flags, `--version`, `--help`.
//! - `scenario`: the scenario file, rule matching, response checks.
//! - `counter`: response counts per run, kept across processes under a file lock.
//! - `invocation`: catalyst's environment, the prompt, the response chosen for them.
//! - `session`: one invocation from prompt to exit code, the order of a response's effects.
//! - `message`: the final message and its result block.
//! - `actions`: file changes, waiting, dying by a signal.
//! - `tools`: the tool flags' policy and performing tool calls.
//! - `hooks`: `--settings` hooks: `SessionStart`, `PreToolUse`, `Stop`.
//! - `output`: the `text` / `json` / `stream-json` event shapes, and the hooks' transcript.
//! - [`log`]: the invocation log, written here and read by tests.

mod actions;
pub mod cli;
mod counter;
mod error;
mod hooks;
mod invocation;
pub mod log;
mod message;
mod output;
mod scenario;
mod session;
mod tools;

pub use error::Error;
pub use log::{
    invocations, read_log, EndEntry, Invocation, LogEntry, LogEvent, ShellEntry, StartEntry,
    ToolEntry,
};

use std::io::Write;

/// Runs one invocation: `args` are the arguments after the program name. Reads the
/// environment and stdin, writes stdout and stderr, and returns the exit code. It returns
/// without exiting in every case but the `signal` action, which kills the process.
pub fn run(args: Vec<String>) -> i32 {
    let command = match cli::parse(&args) {
        Ok(command) => command,
        Err(e) => return session::refuse_command_line(&args, &e),
    };
    match command {
        cli::Command::Version => print_out(&format!("{}\n", cli::VERSION_LINE)),
        cli::Command::Help => print_out(&cli::help_text()),
        cli::Command::Run(parsed) => session::run(&args, *parsed),
    }
}

fn print_out(text: &str) -> i32 {
    // A closed stdout is the reader's choice, not a failure of `--version`.
    let _ = std::io::stdout().write_all(text.as_bytes());
    0
}
