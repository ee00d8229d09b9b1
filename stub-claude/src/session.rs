//! One print-mode session: choose the response, act it out, answer, log.
//!
//! A response is acted out as one "turn", in a fixed order a test can rely on: `stderr`, then
//! `wait_for` and `sleep_ms`, then `write`/`append`/`delete`, then `tools` (each through the
//! tool flags and the `PreToolUse` hooks), then the decoy tool result, the non-UTF-8 bytes and
//! the flood, then `signal` (dying here, after the partial work) or `usage_limit`, and finally
//! the final message. When a `Stop` hook blocks, `after_stop_block` is acted out as a second
//! turn in the same session. Then comes the `result` event.
//!
//! Under `--input-format stream-json` the session is a conversation, as Claude Code's is: the
//! prompt is the first user message on stdin, and after each `result` the stub reads the next
//! line that is a user message (blocking while stdin is open). End of stdin ends the session
//! with the last turn's exit code. A user message is logged as `follow_up` and answered by one
//! more turn, with its own assistant message and `result` (`num_turns` and the cost counting
//! the whole session): `after_stop_block` acted out, when the first response has one that no
//! Stop hook used, else the last final message given again, with nothing acted out. Stop hooks
//! run only after the first response. A turn that dies by a signal or hits a usage limit ends
//! the session without reading further. The `end` line is written once, when the session ends.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::actions;
use crate::cli::{Args, OutputFormat};
use crate::error::Error;
use crate::hooks::{Hooks, Permission, Settings};
use crate::invocation::{choose, read_prompt, Env, UserMessages};
use crate::log::{EndEntry, LogEvent, LogWriter, StartEntry, ToolEntry};
use crate::message;
use crate::output::{self, Emitter, Outcome};
use crate::scenario::{Facts, Response, ToolCall, UsageLimit};
use crate::tools::{self, ToolPolicy};

/// The model named in events when `--model` is not given.
const DEFAULT_MODEL: &str = "claude-sonnet-4-5-20250929";

/// Refuses a command line that does not parse: the message on stderr, and the refusal in
/// the log, so a test whose profile passes a wrong flag sees why its agent never ran.
pub fn refuse_command_line(argv: &[String], error: &Error) -> i32 {
    refuse(argv, &Env::from_process(), None, &output::uuid(), error)
}

/// Prints `error` and logs the invocation as started, failed and ended with exit code 1.
fn refuse(
    argv: &[String],
    env: &Env,
    model: Option<String>,
    session_id: &str,
    error: &Error,
) -> i32 {
    eprintln!("{error}");
    // Without a log there is nothing more to record; the message above is what matters.
    if let Ok(mut log) = LogWriter::open(env.log.as_deref(), session_id) {
        log.write(LogEvent::Start(start_entry(
            argv,
            env,
            model,
            String::new(),
        )));
        log_failure(&mut log, error);
    }
    1
}

fn start_entry(argv: &[String], env: &Env, model: Option<String>, prompt: String) -> StartEntry {
    StartEntry {
        role: env.role.clone(),
        step: env.step.clone(),
        bead: env.bead.clone(),
        model,
        argv: argv.to_vec(),
        cwd: current_dir().display().to_string(),
        rule: None,
        response: None,
        prompt,
    }
}

fn log_failure(log: &mut LogWriter, error: &Error) {
    log.write(LogEvent::Error {
        message: error.to_string(),
    });
    log.write(LogEvent::End(EndEntry {
        exit_code: 1,
        is_error: true,
        usage_limit: false,
        num_turns: 0,
        cost_usd: 0.0,
        result: String::new(),
    }));
}

fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// Refuses what Claude Code refuses in print mode before it starts.
fn check(args: &Args) -> Result<(), Error> {
    if !args.print {
        return Err(Error::Usage(
            "stub-claude: only print mode (-p/--print) is supported".to_string(),
        ));
    }
    if args.output_format == OutputFormat::StreamJson && !args.verbose {
        return Err(Error::Usage(
            "Error: When using --print, --output-format=stream-json requires --verbose".to_string(),
        ));
    }
    Ok(())
}

/// Runs a session for parsed arguments; `argv` is recorded in the log as given.
pub fn run(argv: &[String], args: Args) -> i32 {
    let started = Instant::now();
    let env = Env::from_process();
    let session_id = args.session_id.clone().unwrap_or_else(output::uuid);
    let (prompt, input) = match check(&args).and_then(|()| read_prompt(&args)) {
        Ok(read) => read,
        Err(e) => return refuse(argv, &env, args.model.clone(), &session_id, &e),
    };
    let facts = Facts {
        role: env.role.clone().unwrap_or_default(),
        step: env.step.clone().unwrap_or_default(),
        bead: env.bead.clone().unwrap_or_default(),
        model: args.model.clone().unwrap_or_default(),
        cwd: current_dir(),
    };
    let mut log = match LogWriter::open(env.log.as_deref(), &session_id) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("stub-claude: cannot open STUB_CLAUDE_LOG: {e}");
            return 1;
        }
    };
    let choice = choose(&env, &facts);
    let mut start = start_entry(argv, &env, args.model.clone(), prompt.clone());
    if let Ok(c) = &choice {
        (start.rule, start.response) = (c.rule, c.index);
    }
    log.write(LogEvent::Start(start));
    let cwd = current_dir();
    let result = choice.and_then(|choice| {
        let mut session = Session::start(&args, &facts, cwd, &session_id, &prompt, &mut log)?;
        session.play(&choice.response, input, started)
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            log_failure(&mut log, &e);
            1
        }
    }
}

/// What a turn's `result` event says, and the exit code if the session ends with it.
struct Answer {
    message: String,
    is_error: bool,
    usage_limit: bool,
    code: i32,
}

/// How a turn ended.
enum TurnEnd {
    Answered(String),
    Limited(String),
    /// The response's signal was raised but did not end the process (it is ignored or
    /// handled); the exit code a shell reports for that signal.
    Died(i32),
}

struct Session<'a> {
    role: String,
    cwd: PathBuf,
    emitter: Emitter,
    hooks: Hooks,
    policy: ToolPolicy,
    bypass_permissions: bool,
    log: &'a mut LogWriter,
    /// The length of the user messages so far (the prompt and the follow-ups).
    input_len: usize,
    turns: u32,
    tool_calls: u32,
    cost_usd: f64,
    denials: Vec<Value>,
    /// Keeps the transcript handed to hooks until the session ends.
    transcript_dir: Option<tempfile::TempDir>,
}

impl<'a> Session<'a> {
    fn start(
        args: &Args,
        facts: &Facts,
        cwd: PathBuf,
        session_id: &str,
        prompt: &str,
        log: &'a mut LogWriter,
    ) -> Result<Session<'a>, Error> {
        let settings = Settings::load(args.settings.as_deref())?;
        let model = args
            .model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_string());
        let bypass_permissions =
            args.skip_permissions || args.permission_mode.as_deref() == Some("bypassPermissions");
        let permission_mode = match (&args.permission_mode, bypass_permissions) {
            (Some(mode), _) => mode.clone(),
            (None, true) => "bypassPermissions".to_string(),
            (None, false) => "default".to_string(),
        };
        // Hooks may read the conversation, as they read Claude Code's own transcripts.
        let transcript_dir = tempfile::Builder::new()
            .prefix("stub-claude-")
            .tempdir()
            .ok();
        let transcript_path = transcript_dir
            .as_ref()
            .map(|d| d.path().join(format!("{session_id}.jsonl")));
        let transcript = transcript_path
            .as_ref()
            .and_then(|p| std::fs::File::create(p).ok());
        let transcript_path = transcript_path
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let hooks = Hooks::new(
            settings,
            &cwd,
            session_id,
            &transcript_path,
            &permission_mode,
        );
        let cwd_text = cwd.display().to_string();
        let emitter = Emitter::new(
            args.output_format,
            Box::new(std::io::stdout()),
            args.include_partial_messages,
            session_id,
            &model,
            &cwd_text,
            transcript,
        );
        let mut session = Session {
            role: facts.role.clone(),
            cwd,
            emitter,
            hooks,
            policy: ToolPolicy::from_args(args),
            bypass_permissions,
            log,
            input_len: prompt.len(),
            turns: 0,
            tool_calls: 0,
            cost_usd: 0.0,
            denials: Vec::new(),
            transcript_dir,
        };
        session.emitter.prompt(prompt);
        if session.hooks.has("SessionStart") {
            for context in session.hooks.session_start(&model) {
                session.log.write(LogEvent::SessionStart {
                    additional_context: context,
                });
            }
        }
        let tools = session.policy.listed();
        session.emitter.init(&tools, &permission_mode);
        Ok(session)
    }

    /// Acts out `first`, and its `after_stop_block` when a Stop hook blocks, and answers with a
    /// result; then, under stream-json input, plays one more turn per follow-up user message
    /// until stdin ends. Returns the exit code of the last turn.
    fn play(
        &mut self,
        first: &Response,
        mut input: Option<UserMessages>,
        started: Instant,
    ) -> Result<i32, Error> {
        // `after_stop_block`, until a Stop hook block or a follow-up uses it.
        let mut spare = first.after_stop_block.as_deref();
        let (mut last, mut end) = self.first_turn(first, &mut spare)?;
        loop {
            let answer = match end {
                TurnEnd::Died(code) => return Ok(code),
                TurnEnd::Limited(message) => Answer {
                    message,
                    is_error: true,
                    usage_limit: true,
                    code: 1,
                },
                TurnEnd::Answered(message) => Answer {
                    message,
                    is_error: last.is_error,
                    usage_limit: false,
                    code: last.exit_code.unwrap_or(i32::from(last.is_error)),
                },
            };
            self.result(&answer, started);
            // A usage limit ends the session: nothing more is read.
            let follow_up = match input.as_mut() {
                Some(input) if !answer.usage_limit => input.next_message(),
                _ => None,
            };
            let Some(text) = follow_up else {
                let code = answer.code;
                self.end(answer);
                return Ok(code);
            };
            self.input_len += text.len();
            self.emitter.prompt(&text);
            self.log.write(LogEvent::FollowUp { text });
            (last, end) = match spare.take() {
                Some(next) => (next, self.turn(next)?),
                None => (last, self.repeat(answer.message)),
            };
        }
    }

    /// The first turn: `first`, then, when a Stop hook blocks its answer, the response in
    /// `spare` (its `after_stop_block`, taken) acted out as a second turn. Returns the response
    /// that answered last and how its turn ended.
    fn first_turn<'r>(
        &mut self,
        first: &'r Response,
        spare: &mut Option<&'r Response>,
    ) -> Result<(&'r Response, TurnEnd), Error> {
        let mut last = first;
        let mut end = self.turn(first)?;
        if let TurnEnd::Answered(message) = &end {
            if let Some(reason) = self.hooks.stop(false, message) {
                self.log.write(LogEvent::StopBlock {
                    reason: reason.clone(),
                    stop_hook_active: false,
                    ignored: false,
                });
                self.emitter
                    .user_text(&format!("Stop hook feedback:\n{reason}"));
                if let Some(next) = spare.take() {
                    last = next;
                    end = self.turn(next)?;
                }
                if let TurnEnd::Answered(message) = &end {
                    // Claude Code's loop guard: a second block does not send the agent back.
                    if let Some(reason) = self.hooks.stop(true, message) {
                        self.log.write(LogEvent::StopBlock {
                            reason,
                            stop_hook_active: true,
                            ignored: true,
                        });
                    }
                }
            }
        }
        Ok((last, end))
    }

    /// A turn that gives the last final message again, as a new assistant message, without
    /// acting anything out (nor costing anything).
    fn repeat(&mut self, message: String) -> TurnEnd {
        self.turns += 1;
        self.emitter.assistant_text(&message);
        TurnEnd::Answered(message)
    }

    /// The `result` event of a turn; `num_turns`, the cost and the permission denials count
    /// the whole session.
    fn result(&mut self, answer: &Answer, started: Instant) {
        let subtype = if answer.is_error && !answer.usage_limit {
            "error_during_execution"
        } else {
            "success"
        };
        let outcome = Outcome {
            subtype,
            is_error: answer.is_error,
            result: answer.message.clone(),
            num_turns: self.turns,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            cost_usd: self.cost_usd,
            input_tokens: (self.input_len / 4) as u64 + 50 * u64::from(self.turns),
            output_tokens: (answer.message.len() / 4) as u64 + 10,
            permission_denials: self.denials.clone(),
        };
        self.emitter.result(&outcome);
    }

    /// The `end` line, once, with the last turn's answer.
    fn end(&mut self, answer: Answer) {
        self.log.write(LogEvent::End(EndEntry {
            exit_code: answer.code,
            is_error: answer.is_error,
            usage_limit: answer.usage_limit,
            num_turns: self.turns,
            cost_usd: self.cost_usd,
            result: answer.message,
        }));
    }

    fn turn(&mut self, r: &Response) -> Result<TurnEnd, Error> {
        if let Some(text) = &r.stderr {
            if text.ends_with('\n') {
                eprint!("{text}");
            } else {
                eprintln!("{text}");
            }
        }
        if let Some(path) = &r.wait_for {
            actions::wait_for(path, &self.cwd, actions::WAIT_CAP)?;
        }
        if let Some(ms) = r.sleep_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        actions::change_files(r, &self.cwd)?;
        for command in &r.shell {
            let entry = actions::shell(command, &self.cwd);
            self.log.write(LogEvent::Shell(entry));
        }
        for call in &r.tools {
            self.call_tool(call);
        }
        if r.fake_block_in_tool_result {
            self.decoy();
        }
        if r.fake_block_in_earlier_turn {
            // An assistant turn that ends in a complete block, before the real final message.
            self.turns += 1;
            self.emitter.assistant_text(&message::decoy_block());
        }
        if r.non_utf8 {
            self.emitter.not_utf8();
        }
        if let Some(bytes) = r.flood_bytes {
            self.emitter.flood(bytes);
        }
        self.cost_usd += r.cost_usd.unwrap_or(0.0);
        if let Some(spec) = &r.signal {
            let signal = spec
                .signal()
                .ok_or_else(|| Error::Action(format!("unknown signal {spec:?}")))?;
            // Nothing runs after a fatal signal, so the temporary transcript goes first.
            drop(self.transcript_dir.take());
            return Ok(TurnEnd::Died(actions::die_by(signal)));
        }
        self.turns += 1;
        let resets_at = next_hour();
        if let Some(message) = usage_limit_message(r.usage_limit.as_ref(), resets_at) {
            self.emitter.rate_limit_rejected(resets_at);
            self.emitter.assistant_text(&message);
            return Ok(TurnEnd::Limited(message));
        }
        let message = message::final_message(r, &self.role);
        self.emitter.assistant_text(&message);
        Ok(TurnEnd::Answered(message))
    }

    /// One tool call: the tool flags, then the `PreToolUse` hooks, then the tool itself.
    fn call_tool(&mut self, call: &ToolCall) {
        self.tool_calls += 1;
        self.turns += 1;
        let id = format!(
            "toolu_stub_{:03}_{:08x}",
            self.tool_calls,
            output::random_u64() as u32
        );
        self.emitter.tool_use(&id, &call.name, &call.input);
        let verdict = match self.policy.check(&call.name, &call.input) {
            Err(reason) => Err(reason),
            Ok(()) => match self.hooks.pre_tool_use(&call.name, &call.input, &id) {
                Permission::Allow => Ok(()),
                Permission::Ask(_) if self.bypass_permissions => Ok(()),
                Permission::Ask(reason) => Err(format!(
                    "Claude requested permissions to use {}, but print mode cannot ask: {reason}",
                    call.name
                )),
                Permission::Deny(reason) => Err(reason),
            },
        };
        self.log.write(LogEvent::Tool(ToolEntry {
            name: call.name.clone(),
            allowed: verdict.is_ok(),
            reason: verdict.clone().err(),
            input: call.input.clone(),
        }));
        match verdict {
            Ok(()) => {
                let out = tools::perform(&call.name, &call.input, &self.cwd);
                self.emitter.tool_result(&id, &out.content, out.is_error);
            }
            Err(reason) => {
                self.denials.push(json!({
                    "tool_name": call.name,
                    "tool_use_id": id,
                    "tool_input": call.input,
                }));
                self.emitter.tool_result(&id, &reason, true);
            }
        }
    }

    /// A `Read` whose result quotes a complete, contradicting result block.
    fn decoy(&mut self) {
        self.turns += 1;
        let id = format!("toolu_stub_decoy_{:08x}", output::random_u64() as u32);
        self.emitter
            .tool_use(&id, "Read", &json!({"file_path": "NOTES.md"}));
        self.emitter
            .tool_result(&id, &message::decoy_block(), false);
    }
}

/// The message a usage limit is reported with: Claude Code's headless wording, whose part
/// after `|` is the reset time in epoch seconds, unless the scenario gives its own.
fn usage_limit_message(limit: Option<&UsageLimit>, resets_at: u64) -> Option<String> {
    match limit? {
        UsageLimit::Flag(false) => None,
        UsageLimit::Flag(true) => Some(format!("Claude AI usage limit reached|{resets_at}")),
        UsageLimit::Message(message) => Some(message.clone()),
    }
}

/// The next full hour, in epoch seconds: when a usage limit "resets".
fn next_hour() -> u64 {
    (crate::log::now_ms() / 1000 / 3600 + 1) * 3600
}
