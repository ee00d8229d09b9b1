//! Tool calls and stops of running agents: the `hook` method, the daemon's side of `catalyst
//! hook` (docs/agents.md#hooks). The daemon decides, records, and only then answers, so every
//! tool decision is in the journal before the agent acts on it.

use std::path::Path;

use serde_json::Value;

use crate::domain::agent::attempt::{AttemptPolicy, ToolRecord, STOP_TOOL};
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, StepMeta};
use crate::domain::policy::{self, Permission, Scope};
use crate::protocol::{HookAnswer, HookDecision, HookParams, RpcError, TOOL_USED_EVENT};

use super::{Engine, Handled};
use crate::daemon::runner::hook_socket::NETWORK_EVENT;

/// The `tool` of the `agent.tool` event that records a connection the sandbox's network
/// refused.
pub const NETWORK_TOOL: &str = "Network";

impl Engine {
    pub(super) fn hook(&mut self, p: HookParams) -> Handled<HookAnswer> {
        let id = BeadId::new(&p.step).map_err(|e| RpcError::bad_request(e.to_string()))?;
        let step = self
            .store
            .state()
            .get(id.as_str())
            .cloned()
            .ok_or_else(|| RpcError::not_found(format!("step `{id}` does not exist")))?;
        let meta = step
            .step_meta()
            .ok_or_else(|| RpcError::bad_request(format!("`{id}` is not a step")))?;
        match p.event.as_str() {
            "PreToolUse" => self.hook_tool(&step, &meta, &p.payload),
            "Stop" => self.hook_stop(&step, &meta, &p.payload),
            "SessionStart" => Ok(self.hook_session(&step, &meta)),
            TOOL_USED_EVENT => self.tool_used(&step, &meta, &p.payload),
            NETWORK_EVENT => self.network_refused(&step, &meta, &p.payload),
            other => Err(RpcError::bad_request(format!(
                "unknown hook event `{other}` (PreToolUse, Stop, SessionStart, {TOOL_USED_EVENT})"
            ))),
        }
    }

    /// The worktree `step`'s agent works in: its own when it runs beside others of its bead,
    /// else its bead's.
    fn worktree_of(&self, step: &Bead, meta: &StepMeta) -> std::path::PathBuf {
        match self.dispatch.running.get(&step.id) {
            Some(r) if r.side => self.repo.worktree_path(&step.id),
            _ => self.repo.worktree_path(&meta.bead),
        }
    }

    /// Whether `step` is the step running for its bead now: hooks of an agent that outlived
    /// its attempt (a stopped run's straggler) get no permissions.
    fn is_running(&self, step: &Bead) -> bool {
        self.dispatch.running.contains_key(&step.id)
    }

    fn hook_tool(&mut self, step: &Bead, meta: &StepMeta, payload: &Value) -> Handled<HookAnswer> {
        let tool = payload["tool_name"].as_str().unwrap_or_default().to_owned();
        let input = &payload["tool_input"];
        let verdict = if tool.is_empty() {
            Permission::Deny("the hook input names no tool".into())
        } else if !self.is_running(step) {
            Permission::Deny(format!(
                "step `{}` is not running: its agent may not use tools",
                step.id
            ))
        } else {
            let config = &self.loaded.config;
            let worktree = self.worktree_of(step, meta);
            let policy = config.role_policy(meta.role);
            let scope = Scope {
                access: policy.access,
                tools: policy.tools_for(meta.tools.as_ref()),
                worktree: &worktree,
                target_branch: &config.target_branch,
                fs: &crate::daemon::resolver::RealFs,
            };
            let cwd = payload["cwd"].as_str().map(Path::new);
            policy::decide(&scope, &tool, input, cwd)
        };
        self.record_for_client(vec![EventBody::AgentTool {
            bead: meta.bead.clone(),
            step: step.id.clone(),
            tool: tool.clone(),
            allowed: verdict.is_allowed(),
            reason: verdict.reason().map(str::to_owned),
            target: policy::target(&tool, input),
        }])?;
        Ok(HookAnswer::for_tool(&verdict, meta.role))
    }

    /// The attempt's proxy refused a connection: recorded like a denied tool call.
    fn network_refused(
        &mut self,
        step: &Bead,
        meta: &StepMeta,
        payload: &Value,
    ) -> Handled<HookAnswer> {
        self.record_for_client(vec![EventBody::AgentTool {
            bead: meta.bead.clone(),
            step: step.id.clone(),
            tool: NETWORK_TOOL.into(),
            allowed: false,
            reason: Some(
                "not one of the profile's model hosts (`network = \"model-only\"`)".into(),
            ),
            target: payload["target"].as_str().map(str::to_owned),
        }])?;
        Ok(HookAnswer {
            decision: Some(HookDecision::Deny),
            ..Default::default()
        })
    }

    /// Sends the agent back once per attempt when its final message has no valid result
    /// block, so it corrects itself instead of costing a retry.
    fn hook_stop(&mut self, step: &Bead, meta: &StepMeta, payload: &Value) -> Handled<HookAnswer> {
        let allow = HookAnswer {
            decision: Some(HookDecision::Allow),
            ..Default::default()
        };
        if payload["stop_hook_active"].as_bool() == Some(true) {
            return Ok(allow);
        }
        // Once per attempt, and only for the attempt running now.
        let blocked_before = self
            .dispatch
            .running
            .get(&step.id)
            .is_none_or(|r| r.stop_blocked);
        // Without the message there is nothing to judge; the daemon reads the result anyway.
        let Some(message) = payload["last_assistant_message"].as_str() else {
            return Ok(allow);
        };
        if blocked_before {
            return Ok(allow);
        }
        let Err(malformed) = crate::domain::result::parse(message, Some(meta.role)) else {
            return Ok(allow);
        };
        let reason = self
            .attempt_policy(step, meta)
            .stop_reason(&malformed.to_string());
        self.record_for_client(vec![EventBody::AgentTool {
            bead: meta.bead.clone(),
            step: step.id.clone(),
            tool: STOP_TOOL.into(),
            allowed: false,
            reason: Some(format!("no valid result block: {malformed}")),
            target: None,
        }])?;
        if let Some(running) = self.dispatch.running.get_mut(&step.id) {
            running.stop_blocked = true;
        }
        Ok(HookAnswer {
            decision: Some(HookDecision::Block),
            reason: Some(reason),
            additional_context: None,
        })
    }

    /// The step, its files and its tool policy, added to the agent's context at start.
    fn hook_session(&self, step: &Bead, meta: &StepMeta) -> HookAnswer {
        HookAnswer {
            decision: None,
            reason: None,
            additional_context: Some(self.attempt_policy(step, meta).session_text()),
        }
    }

    /// The policy of `step`'s running attempt, as the runner wrote it for the hooks.
    fn attempt_policy(&self, step: &Bead, meta: &StepMeta) -> AttemptPolicy {
        let config = &self.loaded.config;
        let attempt = self
            .dispatch
            .running
            .get(&step.id)
            .map_or(meta.attempts, |r| r.attempt);
        let run_dir = self.paths.run_dir(&meta.bead, &meta.step, attempt);
        AttemptPolicy::for_step(
            &config.role_policy(meta.role),
            &config.target_branch,
            &step.id,
            meta,
            attempt,
            self.worktree_of(step, meta),
            &run_dir,
            self.loaded.prompts.contract(),
        )
    }

    /// Decisions the attempt's hooks made on their own (from the attempt's policy file), read
    /// from its tool log by its socket: recorded in the order they were made. The agent did
    /// not wait for them.
    fn tool_used(&mut self, step: &Bead, meta: &StepMeta, payload: &Value) -> Handled<HookAnswer> {
        let records: Vec<ToolRecord> = serde_json::from_value(payload["records"].clone())
            .map_err(|e| RpcError::bad_request(format!("bad tool records: {e}")))?;
        let events = records
            .into_iter()
            .map(|r| agent_tool(&meta.bead, &step.id, r))
            .collect();
        self.record_for_client(events)?;
        Ok(HookAnswer::default())
    }
}

/// The `agent.tool` event of a decision a hook made on its own.
pub(super) fn agent_tool(bead: &BeadId, step: &BeadId, r: ToolRecord) -> EventBody {
    EventBody::AgentTool {
        bead: bead.clone(),
        step: step.clone(),
        tool: r.tool,
        allowed: r.allowed,
        reason: r.reason,
        target: r.target,
    }
}
