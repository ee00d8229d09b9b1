//! Agent CLIs as data: profiles, what a finished run reports, and the outcome the router reads
//! from it.

pub mod attempt;
pub mod claude;
pub mod codex;
pub mod conversation;
pub mod limits;
pub mod outcome;
pub mod profile;
pub mod report;
pub mod sandbox;
pub mod settings;
pub mod stream;
pub mod transcript;
pub mod unavailable;

#[cfg(test)]
pub(crate) mod tests;
