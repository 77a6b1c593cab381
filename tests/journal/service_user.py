"""The daemon as the service user: an unprivileged uid with the unit's UMask=0077.

The package runs `tablectl run` as `User=tablectl` (systemd/tablectl@.service); a test runs
it as that user when the machine has it, else as `nobody`, through `setpriv` on the system
Python 3.11 with this checkout and the test environment's packages on its path (the venv's
interpreter may live under root's home). Its files live in a directory the user can reach
(pytest's tmp_path is private to root), owned by the user, mode 0700 like StateDirectory=.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journal.crashing import in_ci
from tests.journal.history import ServiceUser

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3.11"


def service_user() -> ServiceUser:
    """The package's `tablectl` user where it exists, else `nobody`; skip (fail under CI)
    where this process cannot change user."""
    why = None
    if os.geteuid() != 0:
        why = "running the daemon as the service user needs root"
    elif not os.path.exists(SYSTEM_PYTHON) or shutil.which("setpriv") is None:
        why = f"running the daemon as the service user needs {SYSTEM_PYTHON} and setpriv"
    if why is not None:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    try:
        account = pwd.getpwnam("tablectl")
    except KeyError:
        account = pwd.getpwnam("nobody")
    site = next((REPO / ".venv" / "lib").glob("python3.11/site-packages"))
    return ServiceUser(
        uid=account.pw_uid,
        gid=account.pw_gid,
        name=account.pw_name,
        group=grp.getgrgid(account.pw_gid).gr_name,
        python=SYSTEM_PYTHON,
        path=f"{REPO / '.src'}:{site}",
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can traverse, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="tablectl-user-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def hand_over(directory: Path, user: ServiceUser) -> None:
    """Every file under `directory` owned by the user, the directory 0700 (StateDirectory=)."""
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), user.uid, user.gid)
    os.chown(directory, user.uid, user.gid)
    directory.chmod(0o700)
