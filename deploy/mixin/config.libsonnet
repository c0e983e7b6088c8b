// The mixin's settings. Override any of them in your own jsonnet:
//   (import 'powerdiag/deploy/mixin/mixin.libsonnet') + { _config+:: { jobSelector: 'job="db-agents"' } }
{
  _config+:: {
    // Selects the agent's scrape job in the alert expressions.
    jobSelector: 'job="powerdiag"',
    // Where the runbooks live: docs/runbooks/ in the source, installed by the .deb and .rpm
    // under /usr/share/powerdiag/runbooks. Point it at a copy you serve (a wiki, your git
    // host's docs/runbooks/) to make the links clickable from Alertmanager.
    runbookBaseUrl: 'file:///usr/share/powerdiag/runbooks',

    // A failing critical check that measures a symptom (a thrashing vector cache): pages.
    criticalCheckFor: '2m',
    // A failing critical check about configuration (a cache size, an LPAR mode): a person has
    // to schedule the change, so it waits and opens a ticket instead of paging at night.
    configurationCheckFor: '1h',
    // The critical rules whose findings are configuration facts.
    configurationChecks: ['PD101', 'PD401', 'PD805'],
    // A failing warning check: a ticket.
    warningCheckFor: '30m',

    agentDownFor: '5m',
    mariadbUnreachableFor: '5m',
    // A served sample older than this many sample intervals (powerdiag_sample_interval_seconds)
    // is stale.
    staleIntervals: 4,
    staleFor: '5m',
    // A collector (powerdiag_collector_success) failing this long.
    collectorFailingFor: '15m',

    // The lock alerts (group powerdiag-locks), on the agent's lock metrics rather than its
    // checks: they name the blocker's series and act sooner than PD217-PD219's check alerts.
    // Sessions waiting for a metadata lock (kind metadata or other_metadata), at least this
    // many, the oldest for more than metadataLockMaxWaitSeconds (PD219's defaults): pages.
    metadataLockMinWaiting: 2,
    metadataLockMaxWaitSeconds: 5,
    metadataLockPileupFor: '1m',
    // Seconds spent in row-lock waits per second (the sessions waiting on average, counted as
    // the waits end) over rowLockTimeWindow: a ticket.
    rowLockTimeMaxRate: 1,
    rowLockTimeWindow: '5m',
    rowLockTimeFor: '15m',
    // InnoDB deadlocks per minute over deadlocksWindow: a ticket.
    deadlocksMaxPerMinute: 5,
    deadlocksWindow: '5m',
    deadlocksFor: '10m',
    // A replication connection's IO or SQL thread not running (the mysqld mixin's
    // MySQLReplicationNotRunning): pages.
    replicationNotRunningFor: '2m',
    // Lag less SQL_Delay above replicationLagMaxSeconds and, at its rate over the last 5
    // minutes, not gone within replicationLagCatchUpSeconds (the mysqld mixin's
    // MySQLReplicationLag, PD222's defaults): pages.
    replicationLagMaxSeconds: 30,
    replicationLagCatchUpSeconds: 120,
    replicationLagFor: '1m',
    // Semi-sync enabled on a primary that replicates asynchronously (PD224): pages.
    semisyncFellBackFor: '1m',
    // Galera: a node refusing queries (not ready, or outside the Primary component) pages; one
    // not Synced without wsrep_desync opens a ticket (the mysqld mixin's MySQLGaleraNotReady
    // and MySQLGaleraOutOfSync); a cluster smaller than its largest over galeraSizeWindow
    // pages (a node lost, PD225).
    galeraNotReadyFor: '2m',
    galeraOutOfSyncFor: '5m',
    galeraSizeWindow: '1h',
    galeraNodeLostFor: '1m',
    // Flow control pausing replication more than this share of the time over 5 minutes
    // (PD226's default), and a receive queue above galeraMaxRecvQueue (PD227's, Galera's
    // gcs.fc_limit): tickets.
    galeraFlowControlMaxShare: 0.1,
    galeraFlowControlFor: '10m',
    galeraMaxRecvQueue: 16,
    galeraApplyQueueFor: '10m',

    // Grafana-managed alerting (grafana-alerts.libsonnet): the same rules, evaluated by Grafana.
    // The Prometheus data source's uid (deploy/grafana/provisioning/datasources/prometheus.yml).
    grafanaDatasourceUid: 'prometheus',
    // The Grafana folder the rule groups go in (the dashboard's provisioning folder).
    grafanaFolder: 'powerdiag',
    grafanaOrgId: 1,
    // How often Grafana evaluates the groups: prometheus-fleet.yml's evaluation_interval.
    grafanaEvaluationInterval: '30s',
  },
}
