//! Links `libperfstat` on AIX only; every other target builds the types alone.

// A build script talks to cargo through stdout.
#![allow(clippy::print_stdout)]

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("aix") {
        println!("cargo:rustc-link-lib=perfstat");
    }
}
