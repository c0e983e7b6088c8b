# powerdiag .rpm %postun: forget the removed unit. The powerdiag user stays.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || :
fi
