"""The Debian package installed on a bare Debian 12 root (issue 26): `make deb`'s package, with
apt resolving its dependencies, checked without booting; then upgraded to a rebuilt version and
removed and purged, the journal kept throughout.

The root is debootstrap's minbase of bookworm from the mirror this machine's apt uses; its
tarball is cached (TABLECTL_DEB_CACHE, default /var/cache/tablectl-deb-test) with apt's
downloaded packages, so a second run needs no download, and a first run makes both. Every
command inside the root runs in a private mount namespace (`unshare -m`) that mounts /proc and
/dev for it, so nothing is left mounted whatever happens. No service starts in the root (a
policy-rc.d, as Debian's chroots have): the boot is the last test's, with systemd-nspawn.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from opstools import REPO, missing, require_tool

pytestmark = [pytest.mark.slow, pytest.mark.long]

CACHE = Path(os.environ.get("TABLECTL_DEB_CACHE", "/var/cache/tablectl-deb-test"))
SUITE = "bookworm"


def mirror() -> str:
    """The Debian mirror of this machine's apt sources (deb822 or one-line), else Debian's."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for path in sources:
        if not path.is_file() or path.name.endswith(("disabled-by-farm", ".save")):
            continue
        text = path.read_text(errors="replace")
        for match in re.finditer(r"^URIs:\s*(\S+)|^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.M):
            uri = match.group(1) or match.group(2)
            if uri.rstrip("/").endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def run(
    args: list[str], timeout: float = 300, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False,
                          **kwargs)  # type: ignore[call-overload]  # fmt: skip


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


# -- the packages ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Packages:
    first: Path  # this checkout's release
    second: Path  # the same rebuilt with a bumped version
    first_version: str
    second_version: str


def build_package(source: Path, out: Path) -> Path:
    out.mkdir(parents=True)
    # no isolation: the test environment has the build backend ([build-system], the test extra)
    ok(run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
            str(source)]))  # fmt: skip
    (wheel,) = out.glob("tablectl-*.whl")
    wheelhouse = CACHE / "wheelhouse"  # the pinned dependencies, downloaded once
    wheelhouse.mkdir(parents=True, exist_ok=True)
    built = ok(run([sys.executable, str(REPO / "packaging/deb/build.py"), "--wheel", str(wheel),
                    "--out", str(out), "--wheelhouse", str(wheelhouse)]))  # fmt: skip
    return Path(built.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Packages:
    require_tool("dpkg-deb")
    require_tool("dpkg-shlibdeps")
    if not Path("/usr/bin/python3.11").exists():
        missing("/usr/bin/python3.11 (Debian 12's python3.11) builds the package's environment")
    base = tmp_path_factory.mktemp("deb")
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".*cache", ".bench", ".src"
    )
    from tablectl.controller import __version__

    first_source = base / "first-source"
    shutil.copytree(REPO, first_source, ignore=ignore, symlinks=True)
    first = build_package(first_source, base / "first")
    second_source = base / "second-source"
    shutil.copytree(first_source, second_source, symlinks=True)
    bumped = f"{__version__}.post1"
    init = second_source / "controller" / "__init__.py"
    init.write_text(init.read_text().replace(f'"{__version__}"', f'"{bumped}"'))
    second = build_package(second_source, base / "second")
    return Packages(first, second, __version__, bumped)


def test_the_package_passes_lintian_without_errors_or_warnings(packages: Packages) -> None:
    lintian = require_tool("lintian")
    done = run([lintian, "--fail-on", "error,warning", str(packages.first)], timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    tags = [line for line in done.stdout.splitlines() if re.match(r"^[EW]: ", line)]
    assert tags == []
    control = ok(run(["dpkg-deb", "--field", str(packages.first), "Depends"]))
    for needed in ("python3.11", "libusb-1.0-0", "libpq5", "systemd", "udev"):
        assert needed in control.split(", ") or needed in control, control


# -- the bare root ---------------------------------------------------------------------------


def bare_root_tarball() -> Path:
    """debootstrap's minbase of bookworm, made once and cached as a tarball."""
    tarball = CACHE / f"{SUITE}-minbase-{os.uname().machine}.tar"
    if tarball.exists():
        return tarball
    debootstrap = require_tool("debootstrap")
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = CACHE / "bootstrap.tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    ok(run([debootstrap, "--variant=minbase", SUITE, str(scratch), mirror()], timeout=900))
    partial = tarball.with_suffix(".tmp")
    ok(run(["tar", "-C", str(scratch), "--numeric-owner", "-cf", str(partial), "."], timeout=300))
    partial.rename(tarball)
    shutil.rmtree(scratch)
    return tarball


class Root:
    """A bare Debian root in a directory; `sh` runs a shell script inside it (chroot)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.archives = CACHE / "apt-archives"
        self.archives.mkdir(parents=True, exist_ok=True)

    def sh(self, script: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        setup = (
            'set -e; R="$0"; mount -t proc proc "$R/proc"; mount --rbind /dev "$R/dev"; '
            f'mount --bind {self.archives} "$R/var/cache/apt/archives"; '
            'exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
            'LANG=C.UTF-8 HOME=/root DEBIAN_FRONTEND=noninteractive /bin/sh -ec "$1"'
        )
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", setup,
                    str(self.path), script], timeout=timeout)  # fmt: skip

    def ok(self, script: str, timeout: float = 600) -> str:
        done = self.sh(script, timeout)
        assert done.returncode == 0, f"in the root: {script}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def stat(self, path: str) -> str:
        return self.ok(f"stat -c '%U:%G %a %F' {path}").strip()


def new_root(tmp_path_factory: pytest.TempPathFactory, name: str) -> Root:
    """A fresh copy of the bare root, with the mirror, DNS and no service started by apt."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        missing("a chroot needs root and unshare (util-linux)")
    tarball = bare_root_tarball()
    path = tmp_path_factory.mktemp(name)
    ok(run(["tar", "-C", str(path), "--numeric-owner", "-xf", str(tarball)], timeout=300))
    shutil.copy("/etc/resolv.conf", path / "etc/resolv.conf")
    # as in Debian's chroots: no package starts a service here
    policy = path / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    sources = path / "etc/apt/sources.list"
    sources.write_text(f"deb {mirror()} {SUITE} main\n")
    return Root(path)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Root:
    return new_root(tmp_path_factory, "bare-root")


def test_install_upgrade_and_removal_on_a_bare_debian_root(packages: Packages, root: Root) -> None:
    # bare: none of the system libraries the daemon needs is there before apt brings them
    bare = root.sh("dpkg-query -W -f '${Package} ${Status}\\n' python3.11 libusb-1.0-0 libpq5")
    assert "install ok installed" not in bare.stdout, bare.stdout
    shutil.copy(packages.first, root.path / "tmp" / packages.first.name)
    shutil.copy(packages.second, root.path / "tmp" / packages.second.name)

    # -- install with apt, dependencies resolved from the mirror
    root.ok("apt-get -qq update")
    installed = root.ok(f"apt-get install -y --no-install-recommends /tmp/{packages.first.name}")
    assert "Setting up tablectl" in installed
    status = root.ok("dpkg-query -W -f '${Package} ${Version} ${Status}\\n' tablectl python3.11 "
                     "libusb-1.0-0 libpq5 systemd udev")  # fmt: skip
    assert status.count("install ok installed") == 6, status
    assert root.ok("tablectl --version").strip() == f"tablectl {packages.first_version}"

    # files, owners and modes
    for path in ("/lib/systemd/system/tablectl@.service", "/lib/udev/rules.d/70-tablectl.rules",
                 "/usr/lib/sysusers.d/tablectl.conf", "/usr/lib/tmpfiles.d/tablectl.conf",
                 "/usr/share/man/man1/tablectl.1.gz", "/usr/share/doc/tablectl/operations.md",
                 "/usr/share/bash-completion/completions/tablectl",
                 "/usr/share/zsh/vendor-completions/_tablectl"):  # fmt: skip
        assert root.stat(path) == "root:root 644 regular file", path
    # every manual page where man looks (dh_installman's place), the monitoring files where
    # operations.md points
    pages = sorted(p.name for p in (REPO / "controller/share/man").glob("*.1"))
    assert len(pages) >= 5 and "tablectl-op.1" in pages
    for page in pages:
        assert root.stat(f"/usr/share/man/man1/{page}.gz") == "root:root 644 regular file", page
    for path in ("prometheus/alerts.yml", "grafana/tablectl.json"):
        assert root.stat(f"/usr/share/tablectl/{path}") == "root:root 644 regular file", path
        assert f"/usr/share/tablectl/{path}" in (REPO / "docs/operations.md").read_text()
    recommends = ok(run(["dpkg-deb", "--field", str(packages.first), "Recommends"])).strip()
    assert recommends == "bash-completion, man-db", recommends
    unit = (root.path / "lib/systemd/system/tablectl@.service").read_text()
    assert "Documentation=file:///usr/share/doc/tablectl/operations.md" in unit
    assert root.ok("readlink -f /usr/bin/tablectl").strip() == "/usr/lib/tablectl/bin/tablectl"
    assert "/usr/lib/tablectl/bin/python" in root.ok("head -1 /usr/lib/tablectl/bin/tablectl")
    assert root.ok("readlink -f /usr/lib/tablectl/bin/python").strip() == "/usr/bin/python3.11"
    # sysusers and tmpfiles applied by the postinst
    assert root.ok("getent passwd tablectl").split(":")[5] == "/var/lib/tablectl"
    assert "tablectl" in root.ok("getent group tablectl-op").strip().split(":")[3].split(",")
    root.ok("getent group tablectl-sup")
    assert root.stat("/var/lib/tablectl") == "tablectl:tablectl 750 directory"
    assert root.stat("/etc/tablectl") == "root:root 755 directory"
    assert root.stat("/run/tablectl") == "root:root 755 directory"
    # the byte-code the sandboxed daemon cannot write, compiled by the postinst
    assert root.ok("find /usr/lib/tablectl -name '*.pyc' | head -1").strip()

    # the unit, as this root's own systemd reads it (an instance of the template)
    verify = root.sh("systemd-analyze verify tablectl@hilo01.service")
    assert verify.returncode == 0 and verify.stdout + verify.stderr == "", verify

    # a table configured as the README says: the example, its key, check-config
    root.ok(
        "tablectl example-config five_card_hilo > /etc/tablectl/hilo01.toml && "
        "sed -i 's/^listen = .*/listen = \"127.0.0.1:0\"/' /etc/tablectl/hilo01.toml"
    )
    root.ok("tablectl journal setup-keys --config /etc/tablectl/hilo01.toml")
    checked = root.sh("tablectl check-config /etc/tablectl/hilo01.toml")
    assert checked.returncode == 0, checked.stderr
    assert "OK: table hilo01, game five_card_hilo" in checked.stdout
    # its serial devices are not plugged here: warnings, not refusals
    assert "shuffler-ASD-HILO-0001 is absent (not plugged yet?)" in checked.stderr

    # libusb taken away: the USB shoe is refused, naming the package; apt brings it back
    root.ok("dpkg --remove --force-depends libusb-1.0-0")
    refused = root.sh("tablectl check-config /etc/tablectl/hilo01.toml")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "devices.shoe.transport: pyusb finds no USB backend" in refused.stderr
    assert "apt install libusb-1.0-0" in refused.stderr
    root.ok("apt-get install -y --no-install-recommends libusb-1.0-0")
    assert root.sh("tablectl check-config /etc/tablectl/hilo01.toml").returncode == 0

    # the floor store's libpq taken away: a table with [floor] is refused, naming libpq5
    root.ok("printf '[floor]\\ndsn = \"dbname=floor\"\\n' >> /etc/tablectl/hilo01.toml")
    root.ok("dpkg --remove --force-depends libpq5")
    refused = root.sh("tablectl check-config /etc/tablectl/hilo01.toml")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "floor.dsn: Python cannot load psycopg" in refused.stderr
    assert "Debian: apt install libpq5" in refused.stderr
    root.ok("apt-get install -y --no-install-recommends libpq5")
    assert root.sh("tablectl check-config /etc/tablectl/hilo01.toml").returncode == 0

    # a serial port the service user may not open: root's check-config answers for tablectl
    root.ok("mkdir -p /srv/ports && mknod -m 0660 /srv/ports/ttyS9 c 4 73 && "
            "chown root:dialout /srv/ports/ttyS9 && "
            "sed 's#/dev/tablectl/discard_rack-RACK-HILO-0001#/srv/ports/ttyS9#' "
            "/etc/tablectl/hilo01.toml > /srv/ports/rack.toml")  # fmt: skip
    port = root.sh("tablectl check-config /srv/ports/rack.toml")
    assert port.returncode == 1
    assert (
        "devices.rack.transport.port: /srv/ports/ttyS9 (owner root, group dialout, mode "
        "0660) cannot be opened for reading and writing by user tablectl"
    ) in port.stderr
    root.ok("chgrp tablectl /srv/ports/ttyS9")
    assert root.sh("tablectl check-config /srv/ports/rack.toml").returncode == 0

    # the whole daemon on a simulated table, its journal where a table's lives
    demo = root.ok(
        "tablectl demo --rounds 3 --fast --seed 5 --metrics-listen 127.0.0.1:0 "
        "--state-dir /var/lib/tablectl/demo",
        timeout=300,
    )
    assert re.search(r"\b3 rounds?\b", demo), demo
    journal = root.path / "var/lib/tablectl/demo/journal.sqlite"
    digest = hashlib.sha256(journal.read_bytes()).hexdigest()
    ok_verify = root.ok("tablectl journal verify /var/lib/tablectl/demo/journal.sqlite")

    # -- upgrade to a rebuilt version: the new program, the same record
    upgraded = root.ok(f"apt-get install -y --no-install-recommends /tmp/{packages.second.name}")
    assert f"Unpacking tablectl ({packages.second_version}-1) over ({packages.first_version}-1)" \
        in upgraded  # fmt: skip
    assert root.ok("tablectl --version").strip() == f"tablectl {packages.second_version}"
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == digest
    assert root.ok("tablectl journal verify /var/lib/tablectl/demo/journal.sqlite") == ok_verify
    assert root.sh("tablectl check-config /etc/tablectl/hilo01.toml").returncode == 0

    # the table enabled as README says (offline here: the link systemctl makes)
    root.ok("systemctl enable tablectl@hilo01")
    wants = root.path / "etc/systemd/system/multi-user.target.wants/tablectl@hilo01.service"
    assert wants.is_symlink()

    # -- removal: the program goes, whole; configurations and journals stay
    root.ok("apt-get remove -y tablectl")
    assert not (root.path / "usr/lib/tablectl").exists()  # no byte-code left behind either
    assert not (root.path / "usr/bin/tablectl").is_symlink()
    assert not (root.path / "lib/systemd/system/tablectl@.service").exists()
    assert (root.path / "etc/tablectl/hilo01.toml").exists()
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == digest

    # -- purge: the configurations go; the journals, a legal record, and their owner stay
    purged = root.ok("dpkg --purge tablectl")
    assert "journals in /var/lib/tablectl are kept" in purged
    assert not (root.path / "etc/tablectl").exists()
    # the enabled table's link goes with the unit it named (deb-systemd-helper purge's way)
    assert not wants.is_symlink()
    assert (root.path / "etc/systemd/system/multi-user.target.wants").is_dir()
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == digest
    assert root.stat("/var/lib/tablectl/demo/journal.sqlite").endswith("regular file")
    root.ok("getent passwd tablectl")


# -- booted: systemd in a container ----------------------------------------------------------

DEMO_TABLE = """
[table]
id = "demo"
game = "three_card_21"
[metrics]
listen = "127.0.0.1:0"
"""


class Booted:
    """The root booted by systemd-nspawn (its own systemd as PID 1); `sh` runs inside it."""

    def __init__(self, root: Root, nspawn: str) -> None:
        self.root = root
        self.process = subprocess.Popen(
            [nspawn, "-D", str(root.path), "--boot", "--register=no", "--keep-unit",
             "--console=pipe", "-q", f"--bind={root.archives}:/var/cache/apt/archives"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.init = 0

    def wait_for_boot(self, seconds: float = 60) -> str | None:
        """None once the container's systemd says it is running; else why it did not boot."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"systemd-nspawn exited {self.process.returncode}: {self.output()}"
            children = run(["pgrep", "-P", str(self.process.pid)]).stdout.split()
            if children:
                self.init = int(children[0])
                state = self.sh("systemctl is-system-running").stdout.strip()
                if state in ("running", "degraded"):
                    return None
            time.sleep(0.5)
        return f"systemd in the container not running after {seconds:.0f} s: {self.output()}"

    def output(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        assert self.process.stdout is not None
        return self.process.stdout.read()[-2000:]

    def sh(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run(["nsenter", "-t", str(self.init), "-a", "/usr/bin/env", "-i",
                    "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                    "DEBIAN_FRONTEND=noninteractive", "/bin/sh", "-ec", script],
                   timeout=timeout)  # fmt: skip

    def ok(self, script: str, timeout: float = 300) -> str:
        done = self.sh(script, timeout)
        assert done.returncode == 0, f"in the container: {script}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def unit(self, *props: str) -> dict[str, str]:
        shown = self.ok("systemctl show tablectl@demo " + " ".join(f"-p {p}" for p in props))
        return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)

    def until(self, what: str, check: Callable[[dict[str, str]], bool], seconds: float) -> None:
        props = ("MainPID", "NRestarts", "ActiveState", "Result", "StatusText")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            state = self.unit(*props)
            if check(state):
                return
            time.sleep(0.25)
        journal = self.sh("journalctl -u tablectl@demo --no-pager | tail -20").stdout
        pytest.fail(f"{what}: not within {seconds} s; unit {state}\n{journal}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # nspawn halts the container on SIGTERM
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def test_booted_the_unit_is_ready_restarted_on_failure_and_by_the_watchdog(
    packages: Packages, tmp_path_factory: pytest.TempPathFactory
) -> None:
    nspawn = shutil.which("systemd-nspawn")
    if nspawn is None:
        missing("systemd-nspawn is not installed (Debian systemd-container)")
        return
    root = new_root(tmp_path_factory, "boot-root")
    for deb in (packages.first, packages.second):
        shutil.copy(deb, root.path / "srv" / deb.name)  # not /tmp: booted, /tmp is a tmpfs
    root.ok("apt-get -qq update")
    root.ok(f"apt-get install -y --no-install-recommends /srv/{packages.first.name}")
    (root.path / "usr/sbin/policy-rc.d").unlink()  # booted, the system is a real one
    (root.path / "etc/tablectl/demo.toml").write_text(DEMO_TABLE)
    root.ok("tablectl journal setup-keys --config /etc/tablectl/demo.toml")
    booted = Booted(root, nspawn)
    try:
        why = booted.wait_for_boot()
        if why is not None:
            pytest.skip(
                f"systemd does not boot in a container here ({why}); "
                "docs/operations.md, 'The Debian package', gives the manual check"
            )

        # READY: `systemctl start` of a Type=notify unit returns once the daemon said READY=1
        booted.ok("systemctl start tablectl@demo", timeout=90)
        first = booted.unit("MainPID", "ActiveState", "StatusText", "NRestarts")
        assert first["ActiveState"] == "active" and first["NRestarts"] == "0", first
        assert first["StatusText"] == "round 0 idle; all devices up", first
        # journald has the line's fields (the native protocol), the message a sentence
        ready = booted.ok("journalctl -u tablectl@demo --no-pager -o cat EVENT=ready TABLE=demo")
        assert ready.startswith("ready: seconds "), ready

        # a crash: Restart=on-failure starts it again (RestartSec=2s), a new process
        booted.ok("systemctl kill -s SIGKILL tablectl@demo")
        booted.until(
            "restart after SIGKILL",
            lambda u: (
                u["NRestarts"] == "1"
                and u["ActiveState"] == "active"
                and u["MainPID"] not in ("0", first["MainPID"])
            ),
            20,
        )
        second = booted.unit("MainPID")["MainPID"]

        # a stalled event loop: no WATCHDOG=1 for WatchdogSec=10s, killed and restarted
        booted.ok("systemctl kill -s SIGSTOP tablectl@demo")
        booted.until(
            "restart by the watchdog",
            lambda u: (
                u["NRestarts"] == "2"
                and u["ActiveState"] == "active"
                and u["MainPID"] not in ("0", second)
            ),
            30,
        )
        assert "Watchdog timeout" in booted.ok("journalctl -u tablectl@demo --no-pager")
        running = booted.unit("MainPID")["MainPID"]

        # an upgrade under a running table: nothing restarted, the command to run is printed
        upgraded = booted.ok(
            f"apt-get install -y --no-install-recommends /srv/{packages.second.name}"
        )
        assert (
            "tablectl@demo.service: between rounds, run: systemctl restart tablectl@demo.service"
        ) in upgraded
        after = booted.unit("MainPID", "ActiveState")
        assert after == {"MainPID": running, "ActiveState": "active"}
        assert "round 0" in booted.ok("tablectl status --table demo")

        # removal while a table runs is refused; stopped first, it goes
        refused = booted.sh("apt-get remove -y tablectl")
        assert refused.returncode != 0
        assert "tablectl: not removed: tables are running: tablectl@demo.service" in (
            refused.stdout + refused.stderr
        )
        assert booted.unit("MainPID")["MainPID"] == running
        booted.ok("systemctl stop tablectl@demo")
        assert booted.unit("Result")["Result"] == "success"  # SIGTERM: a clean stop, exit 0
        booted.ok("apt-get remove -y tablectl")
        assert (root.path / "var/lib/tablectl/demo/journal.sqlite").exists()
    finally:
        booted.stop()


#: What a terminal shows in its first SECONDS of PROGRAM: the program on a pty of 120x40
#: (Textual draws only to a terminal), its output read from the pty's other side, then SIGTERM.
SCREEN = """
import fcntl, os, pty, select, signal, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    os.environ.update(TERM="xterm-256color")
    os.execvp(sys.argv[2], sys.argv[2:])
out = b""
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    if select.select([fd], [], [], 0.2)[0]:
        try:
            out += os.read(fd, 65536)
        except OSError:
            break
os.kill(pid, signal.SIGTERM)
os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
"""


def readme_install_commands() -> list[str]:
    """The commands of README's "Install on a table PC", as a reader copies them."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Install on a table PC", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def boot(root: Root) -> Booted:
    nspawn = shutil.which("systemd-nspawn")
    if nspawn is None:
        missing("systemd-nspawn is not installed (Debian systemd-container)")
    booted = Booted(root, str(nspawn))
    why = booted.wait_for_boot()
    if why is not None:
        booted.stop()
        pytest.skip(
            f"systemd does not boot in a container here ({why}); "
            "docs/operations.md, 'The Debian package', gives the manual check"
        )
    return booted


def plug_the_rack(booted: Booted) -> None:
    """The reference discard rack, simulated on a pty, at /dev/ttyS9 (group tablectl, 0660, as
    a local udev rule would make the PC's own port), before the table starts."""
    booted.ok(
        "systemd-run --unit=rack-sim --property=Type=exec tablectl sim discard_rack "
        "--serial RACK-HILO-0001 --link /run/rack-pty"
    )
    deadline = time.monotonic() + 60
    while booted.sh("test -e /run/rack-pty").returncode != 0:
        assert time.monotonic() < deadline, booted.sh("journalctl -u rack-sim").stdout
        time.sleep(0.25)
    booted.ok(
        'touch /dev/ttyS9 && mount --bind "$(readlink -f /run/rack-pty)" /dev/ttyS9 && '
        "chown root:tablectl /dev/ttyS9 && chmod 0660 /dev/ttyS9"
    )


def edit_the_example(path: Path, rack_firmware: str) -> None:
    """README's "then edit it": the rack on the PC's serial port /dev/ttyS9 with its firmware as
    `tablectl probe` read it, and a metrics port the kernel picks (the host's network)."""
    text = path.read_text()
    head, rack = text.split("[devices.rack]", 1)
    rack = re.sub(
        r"^allowed_firmware_sha256 = .*$",
        f'allowed_firmware_sha256 = ["{rack_firmware}"]',
        rack,
        count=1,
        flags=re.M,
    )
    rack = rack.replace("/dev/tablectl/discard_rack-RACK-HILO-0001", "/dev/ttyS9")
    rack = re.sub(r"^listen = .*$", 'listen = "127.0.0.1:0"', rack, flags=re.M)
    path.write_text(head + "[devices.rack]" + rack)


def test_booted_a_dealer_and_a_supervisor_reach_the_table_installed_as_the_readme_says(
    packages: Packages, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """README's install section run verbatim as root on the booted root, then a dealer (in
    tablectl-op) and a supervisor (in tablectl-op and tablectl-sup), non-root users, run
    `status`, `op` and `watch` against tablectl@hilo01 as systemd started it with the shipped
    unit (issue 34: the unit's seccomp filter kept the socket root's alone).

    The table's discard rack is on /dev/ttyS9: the kernel here has one 8250 port, ttyS0 (this
    machine's console), so the device is the reference rack simulated on a pty inside the
    container, the pty bind-mounted at /dev/ttyS9 as the name the configuration gives."""
    root = new_root(tmp_path_factory, "readme-root")
    # a table PC runs systemd: the init debootstrap's minbase leaves out, installed to boot
    root.ok(
        "apt-get -qq update && apt-get install -y -qq --no-install-recommends systemd-sysv dbus"
    )
    (root.path / "usr/sbin/policy-rc.d").unlink()  # booted, the system is a real one
    deb = packages.first.name
    shutil.copy(packages.first, root.path / "srv" / deb)
    commands = readme_install_commands()
    (root.path / "srv/screen.py").write_text(SCREEN)
    assert commands[0].startswith("apt install ./tablectl_") and "usermod" in commands[-1]
    booted = boot(root)
    try:
        booted.ok("apt-get -qq update")
        booted.ok("useradd -m dealer1 && useradd -m super1")
        for command in commands:
            if command.startswith("apt install "):
                command = f"cd /srv && apt install -y ./{deb}"
            if command.startswith("usermod"):
                # "DEALER", "and tablectl-op,tablectl-sup for supervisors"
                command = "usermod -aG tablectl-op dealer1 && " + command.replace(
                    "tablectl-op DEALER", "tablectl-op,tablectl-sup super1"
                )
            booted.ok(command, timeout=180)
            if command.startswith("cd /srv && apt install"):
                plug_the_rack(booted)
            if command.startswith("tablectl example-config"):
                # "then edit it": the rack on the PC's serial port, its firmware as `probe`
                # reads it, a metrics port of the kernel's
                probed = json.loads(booted.ok("tablectl probe discard_rack --port /dev/ttyS9"))
                edit_the_example(root.path / "etc/tablectl/hilo01.toml", probed["firmware_sha256"])
        unit = booted.ok("systemctl show tablectl@hilo01 -p ActiveState -p StatusText")
        assert "ActiveState=active" in unit, unit
        sock = booted.ok("stat -c '%U:%G %a %F' /run/tablectl/hilo01/operator.sock").strip()
        assert sock == "tablectl:tablectl-op 660 socket", sock

        def as_user(user: str, command: str) -> subprocess.CompletedProcess[str]:
            return booted.sh(f"runuser -u {user} -- {command}")

        for user in ("dealer1", "super1"):
            status = as_user(user, "tablectl status --table hilo01")
            # degraded (exit 1): the shuffler and the shoe are not plugged in; the rack is up
            assert status.returncode == 1, status.stdout + status.stderr
            assert "Permission denied" not in status.stderr
            assert re.search(r"rack\b.*\bup\b", status.stdout), status.stdout
        dealt = as_user("dealer1", "tablectl op dealer_changed --table hilo01")
        assert dealt.returncode == 0, dealt.stdout + dealt.stderr
        assert "dealer_changed" in dealt.stdout
        refused = as_user("dealer1", "tablectl op supervisor_ack --table hilo01")
        assert refused.returncode == 1 and "refused" in refused.stderr, refused
        acked = as_user("super1", "tablectl op supervisor_ack --table hilo01")
        assert "Permission denied" not in acked.stderr and "refused" not in acked.stderr, acked
        assert acked.returncode in (0, 1), acked
        # the journal says who: the users the socket's credentials named
        record = b"".join(
            p.read_bytes() for p in (root.path / "var/lib/tablectl/hilo01").glob("journal.sqlite*")
        )
        assert b"dealer1" in record and b"super1" in record
        # journald: every field of a line a journal field; an absent device said once a while
        fields = booted.ok(
            "journalctl -u tablectl@hilo01 --no-pager -o json EVENT=ready TABLE=hilo01"
        )
        assert '"SYSLOG_IDENTIFIER":"tablectl"' in fields and '"LOGGER":"daemon"' in fields
        failed = booted.ok(
            "journalctl -u tablectl@hilo01 --no-pager -o cat EVENT=connect_failed DEVICE=shuffler"
        ).splitlines()
        assert failed and failed[0].startswith("connect failed: device shuffler"), failed
        assert len(failed) <= 3, failed  # 0, 1 and 3 minutes at most, not every 10 s
        for user in ("dealer1", "super1"):
            screen = as_user(
                user, "python3.11 /srv/screen.py 8 tablectl watch --table hilo01"
            ).stdout
            plain_screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", "", screen)
            assert "does not answer" not in plain_screen, plain_screen[-2000:]
            assert "between rounds" in plain_screen, plain_screen[-2000:]
    finally:
        booted.stop()
