#!/usr/bin/env bash
# Renders the monitoring mixin (deploy/mixin/mixin.libsonnet) to the files shipped in deploy/:
#   deploy/prometheus/powerdiag.rules.yml   (prometheusAlerts)
#   deploy/grafana/powerdiag-fleet.json     (grafanaDashboards)
#   deploy/grafana/provisioning/alerting/powerdiag.yml   (grafanaAlerts: the same alerts,
#                                                         Grafana-managed)
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
mkdir -p "$out/prometheus" "$out/grafana/provisioning/alerting"

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
{
    cat <<'HEADER'
# Grafana-managed alert rules for the powerdiag agent, rendered from the monitoring mixin
# (deploy/mixin: edit config.libsonnet, alerts.libsonnet or grafana-alerts.libsonnet, then run
# deploy/mixin/render.sh). The alternative to Prometheus's rules and Alertmanager: the same
# alerts (expressions, `for`, labels, runbook_url) evaluated by Grafana, which notifies through
# its own contact points and notification policies (route on `severity`).
#   install -D -m 0644 deploy/grafana/provisioning/alerting/powerdiag.yml \
#       /etc/grafana/provisioning/alerting/powerdiag.yml
# Each rule queries the data source with uid "prometheus"
# (deploy/grafana/provisioning/datasources/prometheus.yml; _config.grafanaDatasourceUid) and
# goes in the folder "powerdiag". Use one route, not both: each would notify on its own.
HEADER
    jsonnet -S -J "$HERE" -e "std.manifestYamlDoc((import 'mixin.libsonnet').grafanaAlerts, indent_array_in_object=true, quote_keys=false)"
} >"$out/grafana/provisioning/alerting/powerdiag.yml"

if [ "$mode" = check ]; then
    stale=0
    for f in prometheus/powerdiag.rules.yml grafana/powerdiag-fleet.json \
        grafana/provisioning/alerting/powerdiag.yml; do
        if ! diff -u "$DEPLOY/$f" "$out/$f"; then
            echo "render.sh: deploy/$f differs from the mixin; run deploy/mixin/render.sh" >&2
            stale=1
        fi
    done
    rm -rf "$out"
    exit "$stale"
fi
