#!/bin/sh
# tollgate package: deb postinst / rpm %post.
set -e
install -d -o tollgate -g tollgate -m 0700 /var/lib/tollgate
# The config may hold upstream.sasl's password: the service reads it, others do not.
chown root:tollgate /etc/tollgate/tollgate.yaml
chmod 0640 /etc/tollgate/tollgate.yaml
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # An upgrade moves a running gateway to the new binary. A version that can
    # hand its sockets over says so in its status: reload it (SIGHUP sees the
    # replaced binary and hands over, refusing no connection). An older one
    # is restarted.
    case "$(systemctl show -p StatusText --value tollgate.service 2>/dev/null)" in
    *"hands over"*) systemctl reload tollgate.service >/dev/null 2>&1 || true ;;
    *) systemctl try-restart tollgate.service >/dev/null 2>&1 || true ;;
    esac
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
