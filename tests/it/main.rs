//! powerdiag's integration tests. They run the real `powerdiag` binary against real MariaDB
//! servers that `tests/run.sh` starts (11.8 from Debian trixie, 10.11 from Debian 12), on
//! loopback ports under a temporary directory. Without those servers every test here fails
//! with a message saying how to start them: nothing is skipped silently.

// Test helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod agent;
mod cli;
mod deploy;
mod diff_agents;
mod errors;
mod evicted_stats;
mod examples;
mod linux_fixtures;
mod live_host;
mod mariadb1011;
mod no_database;
mod prometheus;
mod scale;
mod stability;
mod statements;
mod support;
mod vector;
