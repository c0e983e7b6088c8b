#!/usr/bin/env bash
# The release build: static (musl) powerdiag for x86_64, aarch64 and ppc64le, checked, and
# packaged as .deb and .rpm for each. Too heavy for the test command (three release builds with
# LTO; tests/run.sh builds and checks the debug versions of the same), so run it by hand before
# a release (as root: the .deb is installed into a chroot):
#
#   tests/release.sh            (22-70 minutes measured on the shared 2-core VM; docs/deploy.md "Packages and static binaries")
#
#   1. tests/cross.sh build release TARGET... : cargo zigbuild, stripped, static;
#   2. tests/cross.sh check release TARGET... : each binary (aarch64 and ppc64le under
#      qemu-user) collects the same facts from every recorded tree and reports the same on
#      every example snapshot as the native debug build;
#   3. tests/package.sh --target TARGET --profile release : the .deb and .rpm of each, their
#      file lists and scripts checked with dpkg-deb and rpm; the x86_64 .deb installed into a
#      copy of the clean Debian 12 root, where doctor and the agent (the installed unit's
#      ExecStart, as the powerdiag user) must run;
#   4. target/release-artifacts/: the binaries (powerdiag-VERSION-TARGET), the packages and
#      SHA256SUMS.
#
# Environment: RELEASE_TARGETS (default: the three musl targets).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
read -r -a TARGETS <<<"${RELEASE_TARGETS:-x86_64-unknown-linux-musl aarch64-unknown-linux-musl powerpc64le-unknown-linux-musl}"

RUN_T0=$SECONDS
STEP_NAME="" STEP_T0=$SECONDS
step_end() {
    if [ -n "$STEP_NAME" ]; then
        printf '==> %s: %d s (total %d s)\n' "$STEP_NAME" $((SECONDS - STEP_T0)) $((SECONDS - RUN_T0)) >&2
    fi
    STEP_NAME=""
}
step() {
    step_end
    STEP_NAME=$* STEP_T0=$SECONDS
    printf '\n==> %s\n' "$*" >&2
}
finish() {
    local rc=$?
    step_end
    printf '==> release.sh: %s after %d s\n' "$([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)")" $((SECONDS - RUN_T0)) >&2
}
trap finish EXIT
[ "$(id -u)" -eq 0 ] || { echo "release.sh: run as root (the .deb is installed into a chroot)" >&2; exit 1; }

step "set-up: packages.txt, the clean Debian 12 root, the cross toolchain"
"$HERE/harness/setup.sh"
"$HERE/harness/verify-setup.sh"
"$HERE/cross.sh" setup

step "native debug build (the reference the cross builds are compared with)"
cargo build --locked -p powerdiag

step "release builds: ${TARGETS[*]}"
"$HERE/cross.sh" build release "${TARGETS[@]}"

step "the release builds against the native one (aarch64 and ppc64le under qemu-user)"
"$HERE/cross.sh" check release "${TARGETS[@]}"

VERSION=$(cargo pkgid -p powerdiag | sed 's/.*[#@]//')
OUT=$ROOT/target/release-artifacts
rm -rf "$OUT"
mkdir -p "$OUT"
for t in "${TARGETS[@]}"; do
    step "packages for $t (tests/package.sh)"
    POWERDIAG_HOST_BIN=$ROOT/target/debug/powerdiag \
        "$HERE/package.sh" --target "$t" --profile release --out "$ROOT/target/packages/$t"
    cp "$ROOT/target/$t/release/powerdiag" "$OUT/powerdiag-$VERSION-$t"
    cp "$ROOT"/target/packages/"$t"/*.deb "$ROOT"/target/packages/"$t"/*.rpm "$OUT/"
done

step "artifacts"
(cd "$OUT" && sha256sum -- * >SHA256SUMS)
ls -l "$OUT" >&2
