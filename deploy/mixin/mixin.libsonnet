// powerdiag's monitoring mixin: alerts and dashboards for the powerdiag agent, with settings
// in _config (config.libsonnet). deploy/mixin/render.sh writes the files shipped in deploy/.
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'dashboards.libsonnet')
