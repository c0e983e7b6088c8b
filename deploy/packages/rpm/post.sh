# powerdiag .rpm %post ($1 = 1 install, 2 upgrade): create the agent's system user
# (systemd-sysusers from /usr/lib/sysusers.d/powerdiag.conf, else useradd) and reload systemd.
# The service is not enabled: put the monitoring user's password into /etc/powerdiag/my.cnf
# first, then `systemctl enable --now powerdiag-agent`.
if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers powerdiag.conf
elif ! getent passwd powerdiag >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir / \
        --shell /sbin/nologin --comment "powerdiag agent" powerdiag
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || :
    if [ "$1" -ge 2 ] 2>/dev/null; then
        systemctl try-restart powerdiag-agent.service || :
    fi
fi
