#!/bin/sh
# Installs the system tools the test suite uses, only when missing.
# Each entry: the command to look for, then the Debian package providing it.
set -eu
missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
# (entries are added by the features that need them)
need dot graphviz  # tablectl diagram --svg: the state charts
need promtool prometheus
need prometheus prometheus  # the server itself: tests/ops/test_prometheus_live.py
need systemd-analyze systemd
need systemd-sysusers systemd
need systemd-tmpfiles systemd
need udevadm udev
need umockdev-run umockdev
# the floor store's tests start a real PostgreSQL server (tests/floor); Debian keeps its
# server binaries off PATH, in /usr/lib/postgresql/VERSION/bin
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
    || missing="$missing postgresql"
need chromium chromium  # the floor report's page, drawn headless (tests/floor/test_report_page.py)
# pyusb's backend: check-config and run refuse a USB table without it (controller/service/preflight.py)
ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0 ' || missing="$missing libusb-1.0-0"
# make deb and its bare-root test (tests/ops/test_debian_package.py)
need dpkg-deb dpkg
need dpkg-shlibdeps dpkg-dev
need lintian lintian
need strip binutils
need debootstrap debootstrap
need unshare util-linux
need nsenter util-linux
need setpriv util-linux  # the daemon as its service user (tests/journal, tests/powercut)
need systemd-nspawn systemd-container  # the booted check of the package
[ -x /usr/bin/python3.11 ] || missing="$missing python3.11"  # the package's venv interpreter
need faketime faketime  # the daemon's clock across a gaming-day boundary (tests/journal)
# power cuts (tests/powercut): lossyfs is a FUSE filesystem over libfuse 3 (mfusepy loads
# libfuse3.so.3 from Debian's libfuse3-3, a dependency of fuse3, which brings fusermount3)
need fusermount3 fuse3
# erased sealing keys searched for on a real ext4 image (tests/journal/test_key_erasure.py)
need mkfs.ext4 e2fsprogs
need debugfs e2fsprogs
need pgbouncer pgbouncer  # the floor: many table connections on a few server ones (tests/floor, bench)
# a replicated floor that fails over (tests/floor/test_floor_failover.py, bench floor_failover)
# and its backups restored to a point in time (tests/floor/test_floor_backup.py)
need patroni patroni
need etcd etcd-server
need etcdctl etcd-client
need pgbackrest pgbackrest
# Go's sumdb code checks the journal's signed checkpoints and Merkle proofs (tests/gotlog):
# built offline with GO111MODULE=off GOPATH=/usr/share/gocode
need go golang-go
[ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog ] || missing="$missing golang-golang-x-mod-dev"
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
