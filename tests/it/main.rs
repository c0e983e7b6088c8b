//! powerdiag's integration tests. They run the real `powerdiag` binary, most against real
//! MariaDB servers that `tests/run.sh` starts (11.8 from Debian trixie, 10.11 from Debian 12),
//! on loopback ports under a temporary directory.
//!
//! Two kinds, one binary:
//! - tests that need no server (`cli`, `collect_output`, `escapes`, `linux_fixtures`,
//!   `diff_agents`, `diff_hardening`, `layering`, `no_database`, the static checks in `deploy`,
//!   `examples`' replays, and the argument errors in `errors` and `agent`) pass with a plain
//!   `cargo test` on a machine without the test servers: they never read a `POWERDIAG_IT_*`
//!   variable;
//! - tests that need a server ask for it first ([`support::Server::get`]) and, without it,
//!   fail at once with a message naming the variable and how to start the servers: nothing is
//!   skipped silently.

// Test helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod agent;
mod cli;
mod collect_output;
mod deploy;
mod diff_agents;
mod diff_hardening;
mod error_log;
mod errors;
mod escapes;
mod evicted_stats;
mod examples;
mod galera;
mod label_injection;
mod layering;
mod linux_fixtures;
mod live_host;
mod locks;
mod mariadb1011;
mod no_database;
mod no_false_alarms;
mod prometheus;
mod replication;
mod runbooks;
mod saturation;
mod scale;
mod schema;
mod server_pitfalls;
mod session_guard;
mod stability;
mod statements;
mod storage;
mod support;
mod tls;
mod vector;
mod watcher;
