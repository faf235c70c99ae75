#!/bin/sh
# tollgate package: deb postrm / rpm %postun. The user and /var/lib/tollgate
# (the store and the audit log) are kept: remove them by hand if wanted.
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
