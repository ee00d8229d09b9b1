//! What an invocation is: catalyst's environment, the prompt, and the response the scenario
//! chooses for it.

use std::io::{BufRead, Read};
use std::path::PathBuf;

use serde_json::Value;

use crate::cli::{Args, InputFormat};
use crate::counter;
use crate::error::Error;
use crate::scenario::{Facts, Response, Scenario};

/// The environment variables the stub reads.
pub struct Env {
    pub role: Option<String>,
    pub step: Option<String>,
    pub bead: Option<String>,
    /// The step's context file, which tells the run (see [`counter::run_of`]).
    pub context: Option<PathBuf>,
    pub scenario: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub log: Option<PathBuf>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Env {
            role: var("CATALYST_ROLE"),
            step: var("CATALYST_STEP"),
            bead: var("CATALYST_BEAD"),
            context: var("CATALYST_CONTEXT").map(PathBuf::from),
            scenario: var("STUB_CLAUDE_SCENARIO").map(PathBuf::from),
            state: var("STUB_CLAUDE_STATE").map(PathBuf::from),
            log: var("STUB_CLAUDE_LOG").map(PathBuf::from),
        }
    }
}

/// The response chosen for this invocation, and where it came from.
pub struct Choice {
    pub rule: Option<usize>,
    pub index: Option<usize>,
    pub response: Response,
}

/// The first matching rule's next response, or the default DONE when nothing matches.
pub fn choose(env: &Env, facts: &Facts) -> Result<Choice, Error> {
    let none = || Choice {
        rule: None,
        index: None,
        response: Response::default(),
    };
    let Some(path) = &env.scenario else {
        return Ok(none());
    };
    let scenario = Scenario::load(path)?;
    let Some((i, rule)) = scenario.matching_rule(facts) else {
        return Ok(none());
    };
    let key = if rule.per_bead {
        format!("rule-{i}/{}", facts.bead)
    } else {
        format!("rule-{i}")
    };
    let state = env.state.clone().unwrap_or_else(|| {
        let mut name = path.as_os_str().to_owned();
        name.push(".state");
        PathBuf::from(name)
    });
    let run = counter::run_of(env.context.as_deref());
    let taken = counter::take(&state, &run, &key)?;
    let index = usize::try_from(taken)
        .unwrap_or(usize::MAX)
        .min(rule.responses.len() - 1);
    Ok(Choice {
        rule: Some(i),
        index: Some(index),
        response: rule.responses[index].clone(),
    })
}

/// The user messages still to come on stdin under `--input-format stream-json`: one buffered
/// reader kept for the whole session, so nothing read ahead of a message is lost.
pub struct UserMessages {
    reader: Box<dyn BufRead>,
}

impl UserMessages {
    fn stdin() -> UserMessages {
        UserMessages {
            reader: Box::new(std::io::stdin().lock()),
        }
    }

    /// The text of the next line that is a `user` message, skipping other lines; `None` at the
    /// end of stdin. It blocks until that line arrives, as Claude Code waits for its next turn.
    pub fn next_message(&mut self) -> Option<String> {
        let mut line = Vec::new();
        loop {
            line.clear();
            // An unreadable stdin is the same as a closed one: the conversation is over.
            match self.reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            if let Some(message) = user_message(&text) {
                return Some(message);
            }
        }
    }
}

/// The text of a stream-json line that is a `user` message.
fn user_message(line: &str) -> Option<String> {
    let v = serde_json::from_str::<Value>(line.trim()).ok()?;
    (v["type"] == "user").then(|| content_text(&v["message"]["content"]))
}

/// Reads the prompt: the positional argument, else stdin (text to its end, or, under
/// `--input-format stream-json`, the first user message). Under stream-json input with the
/// prompt from stdin, also returns the reader for the user messages that follow it.
pub fn read_prompt(args: &Args) -> Result<(String, Option<UserMessages>), Error> {
    let (prompt, rest) = match (&args.prompt, args.input_format) {
        (Some(prompt), InputFormat::Text) => (prompt.clone(), None),
        // A prompt argument is read as stream-json too: its user-message lines, joined.
        (Some(prompt), InputFormat::StreamJson) => {
            let messages: Vec<String> = prompt.lines().filter_map(user_message).collect();
            (messages.join("\n"), None)
        }
        (None, InputFormat::Text) => {
            let mut bytes = Vec::new();
            // An unreadable stdin is the same as an empty one: refused below, as Claude does.
            let _ = std::io::stdin().read_to_end(&mut bytes);
            (String::from_utf8_lossy(&bytes).into_owned(), None)
        }
        (None, InputFormat::StreamJson) => {
            let mut messages = UserMessages::stdin();
            let prompt = messages.next_message().unwrap_or_default();
            (prompt, Some(messages))
        }
    };
    if prompt.trim().is_empty() {
        return Err(Error::Usage(
            "Error: Input must be provided either through stdin or as a prompt argument when using --print"
                .to_string(),
        ));
    }
    Ok((prompt, rest))
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
