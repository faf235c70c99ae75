#!/bin/sh
# tollgate package: deb postinst / rpm %post.
set -e
install -d -o tollgate -g tollgate -m 0700 /var/lib/tollgate
# The config may hold upstream.sasl's password: the service reads it, others do not.
chown root:tollgate /etc/tollgate/tollgate.yaml
chmod 0640 /etc/tollgate/tollgate.yaml
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # An upgrade restarts a running gateway on the new binary.
    systemctl try-restart tollgate.service >/dev/null 2>&1 || true
fi
case "$1" in
configure | 1)
    if [ -z "$2" ]; then
        echo "tollgate: edit /etc/tollgate/tollgate.yaml, check it with"
        echo "  sudo -u tollgate tollgate doctor --config /etc/tollgate/tollgate.yaml"
        echo "then start it with: sudo systemctl enable --now tollgate"
    fi
    ;;
esac
exit 0
