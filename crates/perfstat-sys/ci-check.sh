#!/usr/bin/env bash
# Cross-target checks of perfstat-sys, for tests/run.sh (CI). Run from anywhere.
#
#   - cargo check for powerpc64le-unknown-linux-gnu and aarch64-unknown-linux-gnu
#     (targets: rustup target add powerpc64le-unknown-linux-gnu aarch64-unknown-linux-gnu);
#   - cargo check and clippy for powerpc64-ibm-aix with -Zbuild-std=core: the AIX-only extern
#     block and safe wrappers type-check, and bindgen's layout asserts hold under the AIX data
#     layout. Tier 3 target, no prebuilt std: needs `rustup component add rust-src` and
#     RUSTC_BOOTSTRAP=1 (set here) for the nightly-only -Z flag. Building std for AIX fails
#     with this toolchain; the crate is no_std so only core is built;
#   - regen.sh --check (the committed bindings match the header): needs clang, libclang-dev
#     and bindgen-cli 0.73.2 (tests/run.sh installs them); fails without them.
#
# Environment: PERFSTAT_AIX_TARGET_DIR (default target/perfstat-aix in the workspace) keeps
# the build-std artifacts apart from the normal target directory.
set -euo pipefail

crate_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$crate_dir/../.." && pwd)
cd "$root"

aix_target_dir=${PERFSTAT_AIX_TARGET_DIR:-$root/target/perfstat-aix}

for target in powerpc64le-unknown-linux-gnu aarch64-unknown-linux-gnu; do
    echo "== cargo check -p perfstat-sys --target $target"
    cargo check -p perfstat-sys --locked --target "$target"
done

if [[ ! -d "$(rustc --print sysroot)/lib/rustlib/src/rust/library/core" ]]; then
    echo "perfstat-sys ci-check: rust-src is missing (rustup component add rust-src)" >&2
    exit 1
fi
echo "== RUSTC_BOOTSTRAP=1 cargo check -p perfstat-sys --target powerpc64-ibm-aix -Zbuild-std=core"
RUSTC_BOOTSTRAP=1 cargo check -p perfstat-sys --locked --target powerpc64-ibm-aix \
    -Zbuild-std=core --target-dir "$aix_target_dir"
echo "== RUSTC_BOOTSTRAP=1 cargo clippy -p perfstat-sys --target powerpc64-ibm-aix -Zbuild-std=core"
RUSTC_BOOTSTRAP=1 cargo clippy -p perfstat-sys --locked --target powerpc64-ibm-aix \
    -Zbuild-std=core --target-dir "$aix_target_dir" -- -D warnings

# The committed bindings must match the header: not skipped when the tools are missing (a
# check that silently does not run proves nothing). tests/run.sh installs both.
if ! command -v "${BINDGEN:-bindgen}" >/dev/null || ! command -v "${CLANG:-clang}" >/dev/null; then
    echo "perfstat-sys ci-check: regen.sh --check needs clang and bindgen 0.73.2:" >&2
    echo "  apt-get install clang libclang-dev && cargo install --locked bindgen-cli --version 0.73.2" >&2
    exit 1
fi
echo "== crates/perfstat-sys/regen.sh --check"
"$crate_dir/regen.sh" --check
echo "perfstat-sys ci-check: ok"
