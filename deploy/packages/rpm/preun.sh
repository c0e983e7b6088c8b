# powerdiag .rpm %preun ($1 = 0 erase, 1 upgrade): stop and disable the agent on erase.
if [ "$1" -eq 0 ] 2>/dev/null && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now powerdiag-agent.service >/dev/null 2>&1 || :
fi
