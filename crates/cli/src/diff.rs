//! `powerdiag diff A B`: two snapshot files, two running agents, or one of each.

use std::path::Path;

use anyhow::{Context, Result};
use powerdiag_agent::remote::{self, RemoteOptions};
use powerdiag_rules::{Snapshot, read_snapshot};

use crate::{args::DiffArgs, exit, report, snapshot::load};

pub(crate) fn run(args: &DiffArgs) -> Result<u8> {
    let opts = RemoteOptions {
        ca_file: args.agent_ca_file.clone(),
        cert_file: args.agent_cert_file.clone(),
        key_file: args.agent_key_file.clone(),
        username: args.agent_username.clone(),
        password_file: args.agent_password_file.clone(),
        timeout: args.agent_timeout,
        allow_insecure_auth: args.agent_allow_insecure_auth,
    };
    let a = side(&args.a, &opts)?;
    let b = side(&args.b, &opts)?;
    let d = powerdiag_rules::diff(&a, &b);
    report::diff(&d, &args.a, &args.b, args.format, args.color)?;
    Ok(exit::OK)
}

/// A snapshot file, or the last snapshot of the agent at that URL.
fn side(arg: &Path, opts: &RemoteOptions) -> Result<Snapshot> {
    let Some(url) = arg.to_str().filter(|s| remote::is_agent_url(s)) else {
        return load(arg);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let text = runtime.block_on(remote::fetch_snapshot(url, opts))?;
    read_snapshot(&text).with_context(|| format!("{url}: the agent's snapshot"))
}
