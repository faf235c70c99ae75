#!/bin/sh
# tollgate package: deb preinst / rpm %pre. Creates the service's user.
set -e
if ! getent group tollgate >/dev/null 2>&1; then
    groupadd --system tollgate
fi
if ! getent passwd tollgate >/dev/null 2>&1; then
    useradd --system --gid tollgate --home-dir /var/lib/tollgate --no-create-home \
        --shell /usr/sbin/nologin --comment "Tollgate Kafka quota gateway" tollgate
fi
exit 0
