// Grafana-managed alert rules (grafanaAlerts), rendered to
// deploy/grafana/provisioning/alerting/powerdiag.yml: every Prometheus alert of
// alerts.libsonnet (prometheusAlerts) as a Grafana rule in the file provisioning format
// (apiVersion 1), with the same expression, `for`, labels and annotations (runbook_url included).
// Each rule has two nodes:
//   A  the alert's PromQL as an instant query on the Prometheus data source
//   B  a math expression that is 1 for every series A returns, whatever its value
//      (`up == 0` returns 0s): the condition, so a series fires exactly when the Prometheus
//      rule would. This is the node Grafana itself writes when it imports Prometheus rules.
// No series means no alert (noDataState OK), as in Prometheus; a query that fails raises
// Grafana's DatasourceError alert (execErrState Error) rather than passing silently.
// Templates: $labels is the same in Grafana; Prometheus's $value (the sample's value) is
// $values.A.Value in Grafana, where $value is a string of every node's labels and values.
local queryRef = 'A';
local conditionRef = 'B';

local grafanaTemplate(s) = std.strReplace(s, '{{ $value ', '{{ $values.%s.Value ' % queryRef);

{
  grafanaAlerts+:: {
    local cfg = $._config,
    local rule(r) = {
      // Grafana uids: at most 40 characters of [a-zA-Z0-9_-]; the alert names qualify.
      uid: r.alert,
      title: r.alert,
      condition: conditionRef,
      data: [
        {
          refId: queryRef,
          // Instant queries look back 5 minutes on their own; Grafana's default window.
          relativeTimeRange: { from: 600, to: 0 },
          datasourceUid: cfg.grafanaDatasourceUid,
          model: {
            datasource: { type: 'prometheus', uid: cfg.grafanaDatasourceUid },
            expr: r.expr,
            instant: true,
            range: false,
            refId: queryRef,
          },
        },
        {
          refId: conditionRef,
          relativeTimeRange: { from: 0, to: 0 },
          datasourceUid: '__expr__',
          model: {
            datasource: { type: '__expr__', uid: '__expr__' },
            type: 'math',
            expression: 'is_number($%(q)s) || is_nan($%(q)s) || is_inf($%(q)s)' % { q: queryRef },
            refId: conditionRef,
          },
        },
      ],
      'for': r['for'],
      labels: r.labels,
      annotations: std.mapWithKey(function(_, v) grafanaTemplate(v), r.annotations),
      noDataState: 'OK',
      execErrState: 'Error',
    },
    apiVersion: 1,
    groups: [
      {
        orgId: cfg.grafanaOrgId,
        name: g.name,
        folder: cfg.grafanaFolder,
        interval: cfg.grafanaEvaluationInterval,
        rules: [rule(r) for r in g.rules],
      }
      for g in $.prometheusAlerts.groups
    ],
  },
}
