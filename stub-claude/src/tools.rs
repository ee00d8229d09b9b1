//! Tools: which ones the command line makes available, and doing what a call asks.
//!
//! The tool flags are the first layer of a role's guardrails (docs/agents.md#hooks), so the stub honours
//! them the way the model experiences them: a tool left out by `--tools`, or named in
//! `--disallowedTools`, is not there to call; a rule such as `Bash(git push:*)` refuses the
//! matching calls. Allowed calls are performed for real, exactly as asked, inside the worktree
//! or not: catching an escape is the hooks' job, and the tests check that they do.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::cli::Args;

/// Claude Code's built-in tools, as its `init` event lists them.
pub const BUILTIN_TOOLS: &[&str] = &[
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "LS",
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
];

/// What the tool flags allow.
#[derive(Clone, Debug, Default)]
pub struct ToolPolicy {
    /// `None`: every tool (no `--tools`, or `--tools default`).
    available: Option<Vec<String>>,
    disallowed: Vec<String>,
}

impl ToolPolicy {
    pub fn from_args(args: &Args) -> ToolPolicy {
        let available = args
            .tools
            .clone()
            .filter(|tools| !tools.iter().any(|t| t == "default"));
        ToolPolicy {
            available,
            disallowed: args.disallowed_tools.clone(),
        }
    }

    /// The tools the `init` event lists.
    pub fn listed(&self) -> Vec<String> {
        BUILTIN_TOOLS
            .iter()
            .map(|t| t.to_string())
            .filter(|t| self.offered(t))
            .collect()
    }

    fn offered(&self, name: &str) -> bool {
        let available = self
            .available
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == name));
        available && !self.disallowed.iter().any(|d| d == name)
    }

    /// `Err(reason)` when the flags refuse this call.
    pub fn check(&self, name: &str, input: &Value) -> Result<(), String> {
        if !self.offered(name) {
            return Err(format!("No such tool available: {name}"));
        }
        let subject = primary_argument(name, input);
        for rule in &self.disallowed {
            let Some(spec) = rule
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
            else {
                continue;
            };
            let hit = match spec.strip_suffix(":*").or_else(|| spec.strip_suffix('*')) {
                Some(prefix) => subject.starts_with(prefix),
                None => subject == spec,
            };
            if hit {
                return Err(format!(
                    "Permission to use {name} has been denied by the rule {rule}"
                ));
            }
        }
        Ok(())
    }
}

/// What a permission rule's parentheses are matched against.
fn primary_argument(name: &str, input: &Value) -> String {
    let key = match name {
        "Bash" => "command",
        "WebFetch" => "url",
        _ => "file_path",
    };
    input[key].as_str().unwrap_or("").to_string()
}

/// What a tool call produced, as its `tool_result` says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

fn ok(content: String) -> ToolOutput {
    ToolOutput {
        content,
        is_error: false,
    }
}

fn failed(content: String) -> ToolOutput {
    ToolOutput {
        content,
        is_error: true,
    }
}

fn resolve(cwd: &Path, path: &str) -> PathBuf {
    cwd.join(path)
}

fn text_arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, ToolOutput> {
    input[key]
        .as_str()
        .ok_or_else(|| failed(format!("InputValidationError: `{key}` is required")))
}

/// Performs an allowed tool call in `cwd`. Tools the stub does not implement succeed without
/// doing anything, so scenarios can call them to test the hooks alone.
pub fn perform(name: &str, input: &Value, cwd: &Path) -> ToolOutput {
    let result = match name {
        "Write" => write(input, cwd),
        "Edit" => edit(input, cwd),
        "Read" => read(input, cwd),
        "Bash" => bash(input, cwd),
        _ => Ok(ok(format!("{name}: done"))),
    };
    result.unwrap_or_else(|failure| failure)
}

fn write(input: &Value, cwd: &Path) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(cwd, text_arg(input, "file_path")?);
    let content = text_arg(input, "content")?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| failed(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(&path, content)
        .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(ok(format!(
        "File created successfully at: {}",
        path.display()
    )))
}

fn edit(input: &Value, cwd: &Path) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(cwd, text_arg(input, "file_path")?);
    let old = text_arg(input, "old_string")?;
    let new = text_arg(input, "new_string")?;
    let replace_all = input["replace_all"].as_bool().unwrap_or(false);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| failed(format!("cannot read {}: {e}", path.display())))?;
    let count = text.matches(old).count();
    if old.is_empty() || count == 0 {
        return Err(failed(format!(
            "String to replace not found in file.\nString: {old}"
        )));
    }
    if count > 1 && !replace_all {
        return Err(failed(format!(
            "Found {count} matches of the string to replace, but replace_all is false."
        )));
    }
    let updated = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    std::fs::write(&path, updated)
        .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(ok(format!("The file {} has been updated.", path.display())))
}

fn read(input: &Value, cwd: &Path) -> Result<ToolOutput, ToolOutput> {
    let path = resolve(cwd, text_arg(input, "file_path")?);
    let bytes = std::fs::read(&path)
        .map_err(|_| failed(format!("File does not exist: {}", path.display())))?;
    Ok(ok(String::from_utf8_lossy(&bytes).into_owned()))
}

fn bash(input: &Value, cwd: &Path) -> Result<ToolOutput, ToolOutput> {
    let command = text_arg(input, "command")?;
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .output()
        .map_err(|e| failed(format!("cannot run sh: {e}")))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    if output.status.success() {
        Ok(ok(text))
    } else {
        let code = output.status.code().unwrap_or(-1);
        Err(failed(format!("Error: Exit code {code}\n{text}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(tools: Option<&[&str]>, disallowed: &[&str]) -> ToolPolicy {
        ToolPolicy {
            available: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
            disallowed: disallowed.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn flags_decide_what_can_be_called() {
        let write = json!({"file_path": "a", "content": ""});
        let push = json!({"command": "git push origin main"});
        let status = json!({"command": "git status"});
        let cases = [
            (policy(None, &[]), "Write", &write, true),
            (policy(Some(&["Read", "Grep"]), &[]), "Write", &write, false),
            (policy(Some(&["Read", "Grep"]), &[]), "Read", &write, true),
            (policy(None, &["Write", "Edit"]), "Write", &write, false),
            (policy(None, &["Bash(git push:*)"]), "Bash", &push, false),
            (policy(None, &["Bash(git push:*)"]), "Bash", &status, true),
            (policy(Some(&[]), &[]), "Read", &write, false),
        ];
        for (i, (policy, name, input, allowed)) in cases.into_iter().enumerate() {
            assert_eq!(
                policy.check(name, input).is_ok(),
                allowed,
                "case {i}: {name}"
            );
        }
        assert!(!policy(None, &["Write"])
            .listed()
            .contains(&"Write".to_string()));
    }

    #[test]
    fn write_edit_read_and_bash_do_what_they_say() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cwd = dir.path();
        let w = perform(
            "Write",
            &json!({"file_path": "sub/a.txt", "content": "one two"}),
            cwd,
        );
        assert!(!w.is_error, "{w:?}");
        let e = perform(
            "Edit",
            &json!({"file_path": "sub/a.txt", "old_string": "two", "new_string": "three"}),
            cwd,
        );
        assert!(!e.is_error, "{e:?}");
        let r = perform("Read", &json!({"file_path": "sub/a.txt"}), cwd);
        assert_eq!(r.content, "one three");
        let b = perform("Bash", &json!({"command": "cat sub/a.txt; exit 3"}), cwd);
        assert!(b.is_error && b.content.contains("one three") && b.content.contains("3"));
        let missing = perform(
            "Edit",
            &json!({"file_path": "sub/a.txt", "old_string": "zzz", "new_string": ""}),
            cwd,
        );
        assert!(missing.is_error);
        assert!(!perform("TodoWrite", &json!({}), cwd).is_error);
    }
}
