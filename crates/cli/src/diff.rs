//! `powerdiag diff A B`.

use anyhow::Result;

use crate::{args::DiffArgs, exit, report, snapshot::load};

pub(crate) fn run(args: &DiffArgs) -> Result<u8> {
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    let d = powerdiag_rules::diff(&a, &b);
    report::diff(&d, &args.a, &args.b, args.format, args.color)?;
    Ok(exit::OK)
}
