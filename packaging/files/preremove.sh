#!/bin/sh
# tollgate package: deb prerm / rpm %preun. Stops the service on removal
# (deb "remove", rpm 0 packages left), not on upgrade.
set -e
case "$1" in
remove | 0)
    if [ -d /run/systemd/system ]; then
        systemctl disable --now tollgate.service >/dev/null 2>&1 || true
    fi
    ;;
esac
exit 0
