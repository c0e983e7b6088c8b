//! Raw bindings to AIX `libperfstat`.
//!
//! Placeholder: the bindings, layout asserts and safe wrappers arrive with the AIX issue.
//! The crate is `no_std` so that it can be compile-checked for `powerpc64-ibm-aix` with
//! `-Zbuild-std=core`.
#![no_std]
