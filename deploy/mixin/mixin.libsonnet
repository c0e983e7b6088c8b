// powerdiag's monitoring mixin: alerts (evaluated by Prometheus, or by Grafana from the same
// rules) and dashboards for the powerdiag agent, with settings in _config (config.libsonnet).
// deploy/mixin/render.sh writes the files shipped in deploy/.
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'grafana-alerts.libsonnet') +
(import 'dashboards.libsonnet')
