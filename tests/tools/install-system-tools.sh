#!/bin/sh
# Installs the system tools the test suite uses, only when missing.
# Each entry: the command to look for, then the Debian package providing it.
set -eu
missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
# (entries are added by the features that need them)
need dot graphviz  # tablectl diagram --svg: the state charts
need promtool prometheus
need systemd-analyze systemd
need systemd-sysusers systemd
need systemd-tmpfiles systemd
need udevadm udev
need umockdev-run umockdev
# the floor store's tests start a real PostgreSQL server (tests/floor); Debian keeps its
# server binaries off PATH, in /usr/lib/postgresql/VERSION/bin
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
    || missing="$missing postgresql"
need faketime faketime  # the daemon's clock across a gaming-day boundary (tests/journal)
need pgbouncer pgbouncer  # the floor: many table connections on a few server ones (tests/floor, bench)
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        # Not root: say what is missing and go on; the tests that need a tool skip
        # outside CI and fail under CI=true, so nothing is silently passed there.
        echo "warning: missing system tools:$missing (install them with apt-get as root)" >&2
        exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
