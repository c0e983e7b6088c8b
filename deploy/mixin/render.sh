#!/usr/bin/env bash
# Renders the monitoring mixin (deploy/mixin/mixin.libsonnet) to the files shipped in deploy/:
#   deploy/prometheus/powerdiag.rules.yml   (prometheusAlerts)
#   deploy/grafana/powerdiag-fleet.json     (grafanaDashboards)
# Edit the mixin, not those files; tests/it/deploy/mixin.rs fails when they differ from a fresh
# render. Needs Debian's `jsonnet` (tests/harness/packages.txt).
#
#   deploy/mixin/render.sh           # rewrite the shipped files
#   deploy/mixin/render.sh --check   # exit 1, with a diff, if they are stale
#   deploy/mixin/render.sh --out DIR # write prometheus/ and grafana/ under DIR instead
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEPLOY=$(cd "$HERE/.." && pwd)
command -v jsonnet >/dev/null 2>&1 ||
    { echo "render.sh: jsonnet is missing: apt-get install jsonnet (tests/harness/packages.txt)" >&2; exit 2; }

mode=write out=$DEPLOY
case ${1:-} in
"") ;;
--check) mode=check out=$(mktemp -d) ;;
--out)
    [ -n "${2:-}" ] || { echo "render.sh: --out needs a directory" >&2; exit 2; }
    out=$2
    ;;
*) echo "usage: deploy/mixin/render.sh [--check | --out DIR]" >&2; exit 2 ;;
esac
mkdir -p "$out/prometheus" "$out/grafana"

{
    cat <<'HEADER'
# Prometheus alerting rules for the powerdiag agent, rendered from the monitoring mixin
# (deploy/mixin: edit config.libsonnet or alerts.libsonnet, then run deploy/mixin/render.sh).
#   rule_files: [/etc/prometheus/rules/powerdiag.rules.yml]
# Checked in CI with `promtool check rules` and unit-tested with `promtool test rules
# powerdiag.rules.test.yml` (every alert firing and not firing). The agent's job is selected by
# _config.jobSelector (job="powerdiag", as in prometheus.yml); `severity` is critical (pages) or
# warning (a ticket) for Alertmanager routing (alertmanager.yml); every runbook_url is
# _config.runbookBaseUrl/PAGE.md (docs/runbooks/, installed under /usr/share/powerdiag/runbooks).
HEADER
    jsonnet -S -J "$HERE" -e "std.manifestYamlDoc((import 'mixin.libsonnet').prometheusAlerts, indent_array_in_object=true, quote_keys=false)"
} >"$out/prometheus/powerdiag.rules.yml"
jsonnet -S -J "$HERE" -e "std.manifestJsonEx((import 'mixin.libsonnet').grafanaDashboards['powerdiag-fleet.json'], '  ')" \
    >"$out/grafana/powerdiag-fleet.json"

if [ "$mode" = check ]; then
    stale=0
    for f in prometheus/powerdiag.rules.yml grafana/powerdiag-fleet.json; do
        if ! diff -u "$DEPLOY/$f" "$out/$f"; then
            echo "render.sh: deploy/$f differs from the mixin; run deploy/mixin/render.sh" >&2
            stale=1
        fi
    done
    rm -rf "$out"
    exit "$stale"
fi
