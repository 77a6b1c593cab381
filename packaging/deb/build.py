"""Build tablectl's Debian package from a release wheel: `make deb` (docs/operations.md,
"The Debian package").

The layout is the wheel in a private virtual environment, /usr/lib/tablectl, made with the
target's own interpreter (/usr/bin/python3.11 of Debian 12), in the manner of dh-virtualenv:
Debian 12 lacks some of the daemon's dependencies (textual) and has others too old
(jsonschema 4.10 < 4.18), so the Python packages come pinned from the versions the test
suite ran with (the build environment's `pip freeze`), while everything the system provides
(the interpreter, libusb, libpq, systemd, udev) is a `Depends:` that apt resolves and
Debian's security updates keep current. psycopg runs on Debian's libpq5 for that reason,
not on the libpq (and OpenSSL) its binary wheel would bundle.

No debhelper: the package is assembled as a tree and `dpkg-deb --root-owner-group` packs it,
so `make deb` needs only dpkg-dev tools and runs without a debian/ source package.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.utils import formatdate
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PREFIX = "/usr/lib/tablectl"
TARGET_PYTHON = "/usr/bin/python3.11"
MAINTAINER = "tablectl developers <tablectl@example.org>"

#: System packages the daemon needs at run time. python3.11: the venv's interpreter (its
#: symlink names /usr/bin/python3.11, so a newer Debian python3 is not enough); libusb-1.0-0:
#: pyusb's backend (a USB device cannot connect without it); libpq5: psycopg, the floor store;
#: systemd: sysusers, tmpfiles, the unit; udev: the device names and permissions.
SYSTEM_DEPENDS = ("python3.11", "libusb-1.0-0", "libpq5", "systemd", "udev")
#: What makes the installed manual pages and shell completion work: `man tablectl-op`,
#: Tab after `tablectl op`.
RECOMMENDS = ("bash-completion", "man-db")
#: Python distributions not shipped: psycopg's bundled libpq, in favour of Debian's libpq5.
DROPPED = ("psycopg-binary",)

DESCRIPTION = """\
controller daemon of a casino card table
 tablectl drives a card table's shufflers, card-reading and dealing shoes,
 hole-card readers and discard racks over serial and USB, follows every round
 in a state machine enforcing the New Jersey rules of its game, records every
 event and decision in a tamper-evident journal and exports Prometheus
 metrics. One daemon per table runs as the systemd unit tablectl@TABLE.
 .
 The program and its Python dependencies live in a private environment under
 /usr/lib/tablectl; the unit, udev rules, sysusers and tmpfiles entries, man
 page, shell completion and documentation are installed where the system
 looks for them."""


def run(*args: str | Path, **kwargs: object) -> str:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, check=False, **kwargs
    )  # type: ignore[call-overload]
    if done.returncode != 0:
        command = " ".join(map(str, args))
        sys.exit(f"{command} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return str(done.stdout)


def wheel_version(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        for line in archive.read(name).decode().splitlines():
            if line.startswith("Version: "):
                return line.split(" ", 1)[1]
    raise SystemExit(f"{wheel}: no Version in its METADATA")


def constraints(path: Path) -> Path:
    """The versions the test suite ran with: this environment's packages, editable ones out."""
    frozen = run(sys.executable, "-m", "pip", "freeze", "--exclude-editable")
    lines = [ln for ln in frozen.splitlines() if ln and not ln.startswith(("-e", "#"))]
    path.write_text("\n".join(lines) + "\n")
    return path


def build_venv(root: Path, wheel: Path, work: Path, wheelhouse: Path | None) -> None:
    venv = root / PREFIX.lstrip("/")
    run(TARGET_PYTHON, "-m", "venv", "--without-pip", venv)
    pins = constraints(work / "constraints.txt")
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    install = (*pip, "--python", venv / "bin" / "python", "install", "--quiet", "--no-compile",
               "-c", pins)  # fmt: skip
    if wheelhouse is None:
        run(*install, wheel)
    else:
        # the pinned dependencies from a local wheelhouse, downloaded only when one is missing
        offline = (*install, "--no-index", "--find-links", wheelhouse, wheel)
        if subprocess.run([str(a) for a in offline], capture_output=True).returncode != 0:
            run(*pip, "download", "--quiet", "--dest", wheelhouse, "--only-binary", ":all:",
                "--python-version", "3.11", "-c", pins, wheel)  # fmt: skip
            run(*offline)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "uninstall",
        "--quiet", "--yes", *DROPPED)  # fmt: skip
    # the environment was made at a scratch path: every text that names it names PREFIX
    scratch = str(venv)
    for path in [*(venv / "bin").iterdir(), venv / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if scratch.encode() in data:
            path.write_bytes(data.replace(scratch.encode(), PREFIX.encode()))
    for direct_url in venv.glob("lib/python3.11/site-packages/*.dist-info/direct_url.json"):
        direct_url.unlink()  # the wheel's scratch path at build time
    for cache in venv.rglob("__pycache__"):
        shutil.rmtree(cache)  # byte-code is the postinst's (compileall), removed by the prerm
    for activate in venv.glob("bin/[Aa]ctivate*"):
        activate.unlink()  # nobody activates a service's environment
    shutil.rmtree(venv / "include")  # empty: nothing is compiled against the environment
    for link in (venv / "bin").iterdir():
        # bin/python -> /usr/bin/python3.11, made relative (Debian policy 10.5)
        if link.is_symlink() and os.readlink(link).startswith("/"):
            target = root / os.readlink(link).lstrip("/")
            relative = os.path.relpath(target, link.parent)
            link.unlink()
            link.symlink_to(relative)
    for shared in venv.rglob("*.so*"):
        # compiled modules of binary wheels come with their symbols (Debian policy 10.1)
        if shared.is_file() and not shared.is_symlink():
            run("strip", "--strip-unneeded", "--remove-section=.comment",
                "--remove-section=.note", shared)  # fmt: skip
    # the console script, the one name on PATH
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/tablectl").symlink_to("../lib/tablectl/bin/tablectl")


def install(source: Path, target: Path, mode: int = 0o644) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(mode)


def gzip_to(data: bytes, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # as `gzip -9n`: no name, no time in the header (reproducible; lintian checks it)
    with (
        open(target, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed,
    ):
        packed.write(data)
    target.chmod(0o644)


def system_files(root: Path, version: str) -> None:
    """The unit, udev rules, sysusers/tmpfiles entries, manual, completion and docs, where a
    Debian 12 system looks (dpkg of bookworm wants /lib for what systemd and udev ship)."""
    systemd = REPO / "systemd"
    install(systemd / "tablectl@.service", root / "lib/systemd/system/tablectl@.service")
    install(systemd / "70-tablectl.rules", root / "lib/udev/rules.d/70-tablectl.rules")
    install(systemd / "tablectl.sysusers", root / "usr/lib/sysusers.d/tablectl.conf")
    install(systemd / "tablectl.tmpfiles", root / "usr/lib/tmpfiles.d/tablectl.conf")
    share = REPO / "controller" / "share"
    # every manual page (tablectl, and the role pages its SEE ALSO names) where man looks,
    # as dh_installman puts them
    for page in sorted((share / "man").glob("*.[1-8]")):
        section = page.suffix.lstrip(".")
        gzip_to(page.read_bytes(), root / f"usr/share/man/man{section}/{page.name}.gz")
    install(share / "bash-completion" / "tablectl",
            root / "usr/share/bash-completion/completions/tablectl")  # fmt: skip
    install(share / "zsh" / "_tablectl", root / "usr/share/zsh/vendor-completions/_tablectl")
    doc = root / "usr/share/doc/tablectl"
    # The unit's Documentation= names operations.md, uncompressed, and it links its siblings.
    for page in sorted((REPO / "docs").glob("*.md")):
        install(page, doc / page.name)
    install(REPO / "README.md", doc / "README.md")
    examples = doc / "examples"
    for example in sorted((REPO / "config").glob("*.toml")):
        install(example, examples / example.name)
    install(systemd / "69-tablectl-local.rules.example",
            examples / "69-tablectl-local.rules.example")  # fmt: skip
    install(HERE / "copyright", doc / "copyright")
    # the monitoring an installation adds to its Prometheus and Grafana (operations.md)
    data = root / "usr/share/tablectl"
    install(REPO / "config/prometheus/alerts.yml", data / "prometheus/alerts.yml")
    install(REPO / "config/prometheus/alerts_test.yml", data / "prometheus/alerts_test.yml")
    install(REPO / "config/grafana/tablectl.json", data / "grafana/tablectl.json")
    changelog = (
        f"tablectl ({version}) unstable; urgency=medium\n\n"
        f"  * Release {version}: see the project's history (git log).\n\n"
        f" -- {MAINTAINER}  {formatdate(float(os.environ.get('SOURCE_DATE_EPOCH', '0')) or None)}\n"
    )
    gzip_to(changelog.encode(), doc / "changelog.Debian.gz")
    overrides = root / "usr/share/lintian/overrides/tablectl"
    install(HERE / "lintian-overrides", overrides)


def control(root: Path, version: str, architecture: str) -> None:
    debian = root / "DEBIAN"
    debian.mkdir()
    for script in ("postinst", "prerm", "postrm"):
        install(HERE / script, debian / script, 0o755)
    size = sum(p.lstat().st_size for p in root.rglob("*") if not p.is_dir()) // 1024
    shlibs = shared_library_depends(root)
    fields = {
        "Package": "tablectl",
        "Version": version,
        "Architecture": architecture,
        "Maintainer": MAINTAINER,
        "Installed-Size": str(size),
        "Depends": ", ".join([*shlibs, *SYSTEM_DEPENDS]),
        "Recommends": ", ".join(RECOMMENDS),
        "Section": "misc",
        "Priority": "optional",
        "Homepage": "https://example.org/tablectl",
        "Description": DESCRIPTION,
    }
    (debian / "control").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    sums = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and debian not in path.parents:
            digest = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
            sums.append(f"{digest}  {path.relative_to(root)}\n")
    (debian / "md5sums").write_text("".join(sums))


def shared_library_depends(root: Path) -> list[str]:
    """The packages the environment's compiled modules link against (dpkg-shlibdeps)."""
    objects = [p for p in root.rglob("*.so*") if p.is_file() and not p.is_symlink()]
    if not objects:
        return []
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "debian").mkdir()
        (Path(scratch) / "debian" / "control").write_text(
            "Source: tablectl\n\nPackage: tablectl\nArchitecture: any\n"
        )
        out = run("dpkg-shlibdeps", "-O", "--ignore-missing-info",
                  *(str(p) for p in objects), cwd=scratch)  # fmt: skip
    depends = out.strip().split("=", 1)[1] if "=" in out else ""
    return [d.strip() for d in depends.split(",") if d.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, required=True, help="tablectl's release wheel")
    parser.add_argument("--out", type=Path, required=True, help="where the .deb goes")
    parser.add_argument(
        "--revision", default="1", help="the Debian revision of this build (VERSION-REVISION)"
    )
    parser.add_argument(
        "--wheelhouse",
        type=Path,
        help="a directory of the dependencies' wheels, filled from the index when one is "
        "missing (rebuilds without the index's round trips)",
    )
    args = parser.parse_args()
    if not Path(TARGET_PYTHON).exists():
        sys.exit(f"{TARGET_PYTHON} is needed: build on Debian 12 (apt install python3.11)")
    version = f"{wheel_version(args.wheel)}-{args.revision}"
    architecture = run("dpkg", "--print-architecture").strip()
    with tempfile.TemporaryDirectory(prefix="tablectl-deb-") as scratch:
        work = Path(scratch)
        root = work / "root"
        root.mkdir()
        build_venv(root, args.wheel.resolve(), work, args.wheelhouse)
        system_files(root, version)
        control(root, version, architecture)
        for path in root.rglob("*"):  # no build machine's umask in the package
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        args.out.mkdir(parents=True, exist_ok=True)
        deb = args.out / f"tablectl_{version}_{architecture}.deb"
        # xz at its fastest level: 3.4 MB instead of 2.8, in seconds instead of twenty
        run("dpkg-deb", "--root-owner-group", "-Zxz", "-z1", "--build", root, deb)
    print(deb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
