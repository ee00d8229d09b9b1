//! The mock as a Forgejo: the same state as the mock GitHub's ([`MockGitHub`](super::MockGitHub),
//! which a test acts on as a person the same way), served on the routes of Forgejo's API v1
//! that the Forgejo client calls ([`serve`]) and shaped as Forgejo shapes its answers
//! ([`shapes`]): review states named Forgejo's way, comments on lines listed per review,
//! statuses with a `status`, lists paged by number with `X-Total-Count`, and labels added only
//! when they exist ([`MockGitHub::create_label`](super::MockGitHub::create_label)).

mod server;
pub mod shapes;

pub use server::serve;

/// Where the mock Forgejo says its web pages are (`html_url`s).
pub const WEB: &str = "https://forgejo.example";
