// The Grafana dashboards (grafanaDashboards), rendered to deploy/grafana/. The fleet dashboard
// selects the job and instances with its own template variables.
{
  grafanaDashboards+:: {
    'powerdiag-fleet.json': import 'dashboards/powerdiag-fleet.json',
  },
}
