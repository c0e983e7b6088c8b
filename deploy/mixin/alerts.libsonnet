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
      {
        name: 'powerdiag-locks',
        rules: [
          // Sessions queue on a metadata lock (a DDL waiting behind an open transaction, and
          // every statement on the table behind the DDL): the table is stopped until someone
          // kills the holder. Pages sooner than PD219's check alert (criticalCheckFor).
          {
            alert: 'PowerdiagMetadataLockPileup',
            expr: 'sum without (kind) (powerdiag_mariadb_lock_waiting_sessions{%s, kind=~"metadata|other_metadata"}) >= %d and max without (kind) (powerdiag_mariadb_lock_oldest_wait_seconds{%s, kind=~"metadata|other_metadata"}) > %g' % [cfg.jobSelector, cfg.metadataLockMinWaiting, cfg.jobSelector, cfg.metadataLockMaxWaitSeconds],
            'for': cfg.metadataLockPileupFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Sessions pile up on a metadata lock on {{ $labels.instance }}',
              description: 'PowerdiagMetadataLockPileup: on {{ $labels.instance }} at least %d sessions have waited for a metadata lock, the oldest for more than %g s, for %s: every new statement on the table queues behind the waiting DDL. The session holding the lock is in `powerdiag_mariadb_lock_blocker_info{instance="{{ $labels.instance }}"}` (thread_id, user, host, command, statement; the value is the sessions queued behind it); `powerdiag doctor` on the host names it with the `KILL` line to release the queue (PD219).' % [cfg.metadataLockMinWaiting, cfg.metadataLockMaxWaitSeconds, cfg.metadataLockPileupFor],
              runbook_url: runbook(cfg, 'PowerdiagMetadataLockPileup'),
            },
          },
          // Time spent waiting for InnoDB row locks, per second: the number of sessions
          // waiting on average (counted when each wait ends).
          {
            alert: 'PowerdiagRowLockTimeHigh',
            expr: 'rate(powerdiag_mariadb_innodb_row_lock_wait_seconds_total{%s}[%s]) > %g' % [cfg.jobSelector, cfg.rowLockTimeWindow, cfg.rowLockTimeMaxRate],
            'for': cfg.rowLockTimeFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Sessions wait for InnoDB row locks on {{ $labels.instance }}',
              description: 'PowerdiagRowLockTimeHigh: on {{ $labels.instance }} sessions have spent more than %g s per second waiting for InnoDB row locks (over %s) for %s: transactions contend for the same rows. `powerdiag doctor` on the host names the blocking sessions while they block (PD217), and `powerdiag_mariadb_lock_blocker_info` carries them.' % [cfg.rowLockTimeMaxRate, cfg.rowLockTimeWindow, cfg.rowLockTimeFor],
              runbook_url: runbook(cfg, 'PowerdiagRowLockTimeHigh'),
            },
          },
          // InnoDB deadlocks, per minute: each rolls back a transaction the application has
          // to retry.
          {
            alert: 'PowerdiagDeadlocksFrequent',
            expr: 'rate(powerdiag_mariadb_innodb_deadlocks_total{%s}[%s]) * 60 > %g' % [cfg.jobSelector, cfg.deadlocksWindow, cfg.deadlocksMaxPerMinute],
            'for': cfg.deadlocksFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'InnoDB deadlocks are frequent on {{ $labels.instance }}',
              description: 'PowerdiagDeadlocksFrequent: on {{ $labels.instance }} InnoDB has detected more than %g deadlocks per minute (over %s) for %s; each rolls back one transaction. `powerdiag doctor` on the host shows the last deadlock, its two transactions and their statements (PD218).' % [cfg.deadlocksMaxPerMinute, cfg.deadlocksWindow, cfg.deadlocksFor],
              runbook_url: runbook(cfg, 'PowerdiagDeadlocksFrequent'),
            },
          },
        ],
      },
      {
        name: 'powerdiag-replication',
        rules: [
          // A replication connection's IO or SQL thread is not running: the replica stopped
          // copying (the mysqld mixin's MySQLReplicationNotRunning; PD221 has the error).
          {
            alert: 'PowerdiagReplicationNotRunning',
            expr: 'powerdiag_mariadb_replication_thread_running{%s} == 0' % cfg.jobSelector,
            'for': cfg.replicationNotRunningFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Replication {{ $labels.thread }} thread not running on {{ $labels.instance }}',
              description: 'PowerdiagReplicationNotRunning: on {{ $labels.instance }} the {{ $labels.thread }} thread of replication connection "{{ $labels.connection }}" (empty: the default one) has not run for %s: the replica copies nothing, and a failover to it loses every transaction since. `powerdiag doctor` on the host shows the server\'s last error and the next step (PD221): never skip events blindly.' % cfg.replicationNotRunningFor,
              runbook_url: runbook(cfg, 'PowerdiagReplicationNotRunning'),
            },
          },
          // Lag less the delay kept by design above the limit, and not on course to be gone
          // within the catch-up time at its rate over 5 minutes (the mysqld mixin's
          // MySQLReplicationLag; PD222 names the cause).
          {
            alert: 'PowerdiagReplicationLag',
            expr: '(powerdiag_mariadb_replication_lag_seconds{%(j)s} - powerdiag_mariadb_replication_sql_delay_seconds{%(j)s}) > %(max)d and (predict_linear(powerdiag_mariadb_replication_lag_seconds{%(j)s}[5m], %(catch)d) - powerdiag_mariadb_replication_sql_delay_seconds{%(j)s}) > 0' % { j: cfg.jobSelector, max: cfg.replicationLagMaxSeconds, catch: cfg.replicationLagCatchUpSeconds },
            'for': cfg.replicationLagFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Replica {{ $labels.instance }} is {{ $value | humanizeDuration }} behind its primary',
              description: 'PowerdiagReplicationLag: replication connection "{{ $labels.connection }}" (empty: the default one) on {{ $labels.instance }} has been more than %d s behind its primary (less SQL_Delay) for %s, and at its rate over 5 minutes it will not have caught up within %d s: reads there are stale and a failover would wait or lose data. `powerdiag doctor` on the host names the probable cause (PD222): a lock held on the replica with its KILL, a table without a primary key, single-threaded apply.' % [cfg.replicationLagMaxSeconds, cfg.replicationLagFor, cfg.replicationLagCatchUpSeconds],
              runbook_url: runbook(cfg, 'PowerdiagReplicationLag'),
            },
          },
          // Semi-sync is enabled but the primary fell back to asynchronous: commits return
          // without a replica's copy, silently (PD224).
          {
            alert: 'PowerdiagSemisyncFellBack',
            expr: 'powerdiag_mariadb_semisync_primary_enabled{%(j)s} == 1 and powerdiag_mariadb_semisync_primary_running{%(j)s} == 0' % { j: cfg.jobSelector },
            'for': cfg.semisyncFellBackFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Semi-sync primary {{ $labels.instance }} replicates asynchronously',
              description: 'PowerdiagSemisyncFellBack: {{ $labels.instance }} has semi-synchronous replication enabled but has committed without waiting for a replica for %s: a failover now can lose every transaction since. `powerdiag_mariadb_semisync_primary_clients` says how many semi-sync replicas are connected; `powerdiag doctor` on the host gives the replica-side statements (PD224).' % cfg.semisyncFellBackFor,
              runbook_url: runbook(cfg, 'PowerdiagSemisyncFellBack'),
            },
          },
        ],
      },
      {
        name: 'powerdiag-galera',
        rules: [
          // The node refuses queries: not ready, or outside the Primary component (the mysqld
          // mixin's MySQLGaleraNotReady; PD225).
          {
            alert: 'PowerdiagGaleraNotReady',
            expr: 'powerdiag_mariadb_galera_ready{%(j)s} == 0 or powerdiag_mariadb_galera_primary{%(j)s} == 0' % { j: cfg.jobSelector },
            'for': cfg.galeraNotReadyFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Galera node {{ $labels.instance }} refuses queries',
              description: 'PowerdiagGaleraNotReady: the Galera node {{ $labels.instance }} has been not ready or outside the Primary component for %s: it answers queries with ERROR 1047. `powerdiag doctor` on the host says which and what to do (PD225): a partition or lost quorum, a join that does not finish.' % cfg.galeraNotReadyFor,
              runbook_url: runbook(cfg, 'PowerdiagGaleraNotReady'),
            },
          },
          // Not Synced and not desynced on purpose (the mysqld mixin's MySQLGaleraOutOfSync).
          {
            alert: 'PowerdiagGaleraOutOfSync',
            expr: 'powerdiag_mariadb_galera_synced{%(j)s} == 0 and powerdiag_mariadb_galera_desync{%(j)s} == 0' % { j: cfg.jobSelector },
            'for': cfg.galeraOutOfSyncFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Galera node {{ $labels.instance }} is not Synced',
              description: 'PowerdiagGaleraOutOfSync: the Galera node {{ $labels.instance }} has not been Synced for %s without wsrep_desync set: it is joining, a donor, or stuck. `powerdiag doctor` on the host shows its state (PD225).' % cfg.galeraOutOfSyncFor,
              runbook_url: runbook(cfg, 'PowerdiagGaleraOutOfSync'),
            },
          },
          // The cluster is smaller than at its largest recently: a node was lost (PD225).
          {
            alert: 'PowerdiagGaleraNodeLost',
            expr: 'powerdiag_mariadb_galera_cluster_size{%(j)s} < max_over_time(powerdiag_mariadb_galera_cluster_size{%(j)s}[%(w)s])' % { j: cfg.jobSelector, w: cfg.galeraSizeWindow },
            'for': cfg.galeraNodeLostFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'The Galera cluster of {{ $labels.instance }} lost a node ({{ $value }} left)',
              description: 'PowerdiagGaleraNodeLost: the Galera cluster seen from {{ $labels.instance }} has had fewer nodes than at its largest over the last %s for %s: a node left or was lost, and the cluster is one failure closer to losing quorum. `powerdiag doctor` on the survivors shows the sizes (PD225); start the lost node again.' % [cfg.galeraSizeWindow, cfg.galeraNodeLostFor],
              runbook_url: runbook(cfg, 'PowerdiagGaleraNodeLost'),
            },
          },
          // Flow control pauses the cluster's writes (PD226).
          {
            alert: 'PowerdiagGaleraFlowControl',
            expr: 'rate(powerdiag_mariadb_galera_flow_control_paused_seconds_total{%(j)s}[5m]) > %(m)g' % { j: cfg.jobSelector, m: cfg.galeraFlowControlMaxShare },
            'for': cfg.galeraFlowControlFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Flow control pauses Galera writes on {{ $labels.instance }}',
              description: 'PowerdiagGaleraFlowControl: on {{ $labels.instance }} flow control has paused replication more than %g of the time (over 5m) for %s: every node of the cluster waits for the slowest. The node whose `powerdiag_mariadb_galera_flow_control_sent_total` grows is the slow one; `powerdiag doctor` there says why (PD226, PD227).' % [cfg.galeraFlowControlMaxShare, cfg.galeraFlowControlFor],
              runbook_url: runbook(cfg, 'PowerdiagGaleraFlowControl'),
            },
          },
          // The receive queue stays long: the node's appliers cannot keep up (PD227; the
          // mysqld mixin's MySQLGaleraDonorFallingBehind for any node).
          {
            alert: 'PowerdiagGaleraApplyQueue',
            expr: 'min_over_time(powerdiag_mariadb_galera_receive_queue{%(j)s}[5m]) >= %(q)d' % { j: cfg.jobSelector, q: cfg.galeraMaxRecvQueue },
            'for': cfg.galeraApplyQueueFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Galera node {{ $labels.instance }} cannot keep up with its receive queue',
              description: 'PowerdiagGaleraApplyQueue: on {{ $labels.instance }} at least %d write sets have waited to be applied throughout 5 minutes, for %s: the node applies more slowly than the cluster writes, serves stale reads and sends flow control. `powerdiag doctor` there says whether more appliers would help (PD227).' % [cfg.galeraMaxRecvQueue, cfg.galeraApplyQueueFor],
              runbook_url: runbook(cfg, 'PowerdiagGaleraApplyQueue'),
            },
          },
        ],
      },
    ],
  },
}
