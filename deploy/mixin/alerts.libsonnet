// The alerting rules (prometheusAlerts), rendered to deploy/prometheus/powerdiag.rules.yml.
// Every alert carries `severity` (critical pages; warning opens a ticket: alertmanager.yml)
// and a runbook under _config.runbookBaseUrl; powerdiag.rules.test.yml unit-tests each one.
local runbook(cfg, page) = '%s/%s.md' % [cfg.runbookBaseUrl, page];

{
  prometheusAlerts+:: {
    local cfg = $._config,
    local configCodes = std.join('|', cfg.configurationChecks),
    groups+: [
      {
        name: 'powerdiag-checks',
        rules: [
          // A critical check that measures a symptom (PD102 mhnsw-cache-thrashing) fails.
          // Checks judge facts that do not flap; the wait rides out one odd sample.
          {
            alert: 'PowerdiagCriticalCheckFailing',
            expr: 'powerdiag_check{%s, severity="critical", status="fail", code!~"%s"} == 1' % [cfg.jobSelector, configCodes],
            'for': cfg.criticalCheckFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.code }} {{ $labels.name }} fails on {{ $labels.instance }}',
              description: "powerdiag's critical check {{ $labels.code }} ({{ $labels.name }}) has failed on {{ $labels.instance }} for %s. Run `powerdiag explain {{ $labels.code }}` for what it detects, why it costs performance and how to fix it, and `powerdiag doctor` on the host for the evidence (the agent serves the same facts at /api/v1/snapshot)." % cfg.criticalCheckFor,
              runbook_url: runbook(cfg, '{{ $labels.code }}'),
            },
          },
          // A critical check about configuration (PD101 mhnsw-cache-undersized, PD401
          // lpar-donating-mode): the fix is a change someone schedules (a restart, an HMC
          // change), so it waits longer and opens a ticket rather than paging at night.
          {
            alert: 'PowerdiagConfigurationCheckFailing',
            expr: 'powerdiag_check{%s, severity="critical", status="fail", code=~"%s"} == 1' % [cfg.jobSelector, configCodes],
            'for': cfg.configurationCheckFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.code }} {{ $labels.name }} (critical, configuration) fails on {{ $labels.instance }}',
              description: "powerdiag's critical check {{ $labels.code }} ({{ $labels.name }}) has failed on {{ $labels.instance }} for %s. It judges the configuration, so the fix is a change to schedule: `powerdiag explain {{ $labels.code }}` gives the remediation and `powerdiag doctor` on the host the evidence." % cfg.configurationCheckFor,
              runbook_url: runbook(cfg, '{{ $labels.code }}'),
            },
          },
          // A warning check fails for a while: worth a ticket, not a page.
          {
            alert: 'PowerdiagWarningCheckFailing',
            expr: 'powerdiag_check{%s, severity="warning", status="fail"} == 1' % cfg.jobSelector,
            'for': cfg.warningCheckFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.code }} {{ $labels.name }} fails on {{ $labels.instance }}',
              description: "powerdiag's warning check {{ $labels.code }} ({{ $labels.name }}) has failed on {{ $labels.instance }} for %s. Run `powerdiag explain {{ $labels.code }}` for what it detects and the remediation, and `powerdiag doctor` on the host for the evidence; to accept the finding, add {{ $labels.code }} to [rules] disabled in the agent's configuration file." % cfg.warningCheckFor,
              runbook_url: runbook(cfg, '{{ $labels.code }}'),
            },
          },
        ],
      },
      {
        name: 'powerdiag-agent',
        rules: [
          // Prometheus cannot scrape the agent: no checks run for this host.
          {
            alert: 'PowerdiagAgentDown',
            expr: 'up{%s} == 0' % cfg.jobSelector,
            'for': cfg.agentDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'powerdiag agent on {{ $labels.instance }} is down',
              description: 'PowerdiagAgentDown: Prometheus has not scraped the powerdiag agent at {{ $labels.instance }} for %s, so none of that host\'s checks are evaluated. On the host: `systemctl status powerdiag-agent` and `journalctl -u powerdiag-agent` (AIX: `lssrc -s powerdiag`); check that port 9987 is reachable from Prometheus and that --web.config.file matches the scrape\'s TLS and basic-auth settings.' % cfg.agentDownFor,
              runbook_url: runbook(cfg, 'PowerdiagAgentDown'),
            },
          },
          // The agent runs but cannot reach MariaDB: every database check is insufficient_data.
          {
            alert: 'PowerdiagMariadbUnreachable',
            expr: 'powerdiag_mariadb_up{%s} == 0' % cfg.jobSelector,
            'for': cfg.mariadbUnreachableFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'powerdiag on {{ $labels.instance }} cannot reach MariaDB',
              description: 'PowerdiagMariadbUnreachable: the powerdiag agent on {{ $labels.instance }} has not reached MariaDB for %s, so the database checks (PD1xx, PD2xx) say insufficient_data. Either MariaDB is down, or the agent\'s connection is wrong: its log names the reason (connection refused, access denied, missing privilege, timeout); `powerdiag doctor --mariadb.defaults-file /etc/powerdiag/my.cnf` on the host shows the same with the fix.' % cfg.mariadbUnreachableFor,
              runbook_url: runbook(cfg, 'PowerdiagMariadbUnreachable'),
            },
          },
          // Scrapes succeed but the served sample is older than a few of the agent's own
          // intervals: the sampler is stuck or every sample overruns its budget (a hung server
          // makes samples fail, not go stale).
          {
            alert: 'PowerdiagSampleStale',
            expr: 'powerdiag_sample_age_seconds{%s} > %d * powerdiag_sample_interval_seconds{%s}' % [cfg.jobSelector, cfg.staleIntervals, cfg.jobSelector],
            'for': cfg.staleFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'powerdiag on {{ $labels.instance }} serves a sample {{ $value | humanizeDuration }} old',
              description: 'PowerdiagSampleStale: the powerdiag agent on {{ $labels.instance }} has served a sample older than %d of its sample intervals (now {{ $value | humanizeDuration }} old) for %s: its verdicts are not current. The agent\'s log says why samples fail ("sample did not finish in time"); restart it (`systemctl restart powerdiag-agent`, AIX: `stopsrc`/`startsrc -s powerdiag`).' % [cfg.staleIntervals, cfg.staleFor],
              runbook_url: runbook(cfg, 'PowerdiagSampleStale'),
            },
          },
          // One collector keeps failing (a file it cannot read, a privilege it lacks): the
          // checks that need its facts say insufficient_data.
          {
            alert: 'PowerdiagCollectorFailing',
            expr: 'powerdiag_collector_success{%s} == 0' % cfg.jobSelector,
            'for': cfg.collectorFailingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'powerdiag collector {{ $labels.collector }} fails on {{ $labels.instance }}',
              description: 'PowerdiagCollectorFailing: the powerdiag agent on {{ $labels.instance }} has failed to run its {{ $labels.collector }} collector for %s, so the checks that need its facts say insufficient_data. `powerdiag doctor` on the host names the error and the fix (a path, a privilege to grant).' % cfg.collectorFailingFor,
              runbook_url: runbook(cfg, 'PowerdiagCollectorFailing'),
            },
          },
        ],
      },
    ],
  },
}
