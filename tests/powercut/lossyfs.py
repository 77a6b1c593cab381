"""lossyfs: a FUSE filesystem that forgets what was not fsynced, so a test can cut the power.

In the spirit of LazyFS (the Jepsen team's FUSE filesystem with its own page cache, used to find
lost writes in etcd and PostgreSQL), written here in Python over libfuse 3 through mfusepy, with
one difference that matters to this project: directory entries are cached too. LazyFS loses
file data that was not fsynced; lossyfs also loses a create, a rename, an unlink or a mkdir
that was not followed by an fsync of its directory, which is what POSIX promises and what
"every rename followed by a directory fsync" is about.

How it works. A real directory (the *backing* directory) is the disk: it holds only what was
made durable. Everything a process does through the mount happens first in memory, as a
kernel's page cache and dentry cache would:

- a file's bytes are written into an in-memory copy (loaded from the backing file on the first
  write), its changed 4 KiB blocks remembered; `fsync`/`fdatasync` writes those blocks, the
  size and the mode to the backing file (a file with no durable name yet gets an anonymous
  one, as an inode allocated on disk but linked nowhere);
- a directory's entries (create, mknod, symlink, mkdir, rename, unlink, rmdir) change only an
  in-memory map; an `fsync` of the directory makes the backing directory hold exactly those
  entries (the entry of a file not yet fsynced points to what is durable of it: nothing, an
  empty file). A rename between two directories needs both fsynced.

A **power cut** (`cut` on the control socket, or an `arm`ed cut that fires at the Nth
operation on a path matching a pattern, before or after the operation) takes the one lock
every operation holds, SIGKILLs the process named (the daemon: killed at the same instant, it
never runs again after the cut), drops everything in memory and makes every later operation
fail with EIO until the mount is unmounted. Its answer says what was dropped (files with
unsynced bytes, directories with unsynced entries), so a test can show that something was.
Mounting again on the same backing directory gives what survived: what was fsynced. Anonymous
files left in the backing directory's `.lossyfs/` (a cut between a file's fsync and its
directory's) are removed at mount, as fsck would.

A `chmod` or `chown` is durable only once its file is fsynced (like its bytes): a
directory's fsync makes a renamed file's entry durable, not a mode it was given since its own
last fsync (a new file's entry carries the mode and owner it was created with).
Unsynced writes are all dropped (the harshest outcome of a real cut, where some of them may
also have reached the disk); a write is never torn inside an fsync. By default a directory
entry needs its directory's fsync (POSIX); `--ext4` models ext4's one journal instead, where
an fsync of any file also commits every directory entry changed so far (so a temporary file
fsynced before its rename survives a cut, as on ext4). SQLite's WAL mode runs on
it unchanged: `-shm` is mapped shared through the kernel's page cache (no `direct_io`), POSIX
and BSD locks are kept by the kernel (the filesystem declares no lock operations). No hard
links and no rename of a directory (EXDEV, so `mv` copies): nothing here needs them.

    python -m tests.powercut.lossyfs BACKING MOUNTPOINT --control SOCKET

runs it in the foreground (`--allow-other`: other users may use the mount, each access
checked by the kernel against the modes and owners lossyfs reports, as for the daemon run as
its service user); `LossyMount` below starts, drives and unmounts it from a test.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

BLOCK = 4096
#: in the backing directory: files fsynced before any durable name, and staging during a
#: directory fsync; hidden from the mount, emptied at mount (fsck's lost+found, discarded)
PRIVATE = ".lossyfs"


class Node:
    """One inode as processes see it through the mount, and where its durable copy lives."""

    def __init__(self, ino: int, mode: int, uid: int, gid: int) -> None:
        self.ino = ino
        self.mode = mode
        self.uid = uid
        self.gid = gid
        #: the mode and owner it was created with: what its entry carries to the disk when
        #: its directory is fsynced before the file itself (a later chmod/chown needs the
        #: file's own fsync)
        self.born = (mode, uid, gid)
        now = time.time_ns()
        self.atime = self.mtime = self.ctime = now
        #: backing paths (relative) holding this inode's durable copy: hard links to one file
        #: (two while a rename between directories is half synced), or the directory
        self.links: set[str] = set()
        self.data: bytearray | None = None  # visible bytes; None: as durable (not loaded)
        self.size = 0
        self.dirty: set[int] = set()  # blocks of `data` not yet durable
        self.meta_dirty = False
        self.target = ""  # a symlink's target
        #: partial mode: a file's unsynced operations in order (("write", offset, bytes),
        #: ("truncate", length), ("meta", mode, uid, gid)); the oldest folded into `base`
        self.log: list[tuple[Any, ...]] = []
        self.log_bytes = 0
        self.base: bytearray | None = None  # durable bytes + the folded operations
        self.base_meta: tuple[int, int, int] | None = None
        #: partial mode: a directory's unsynced entry changes in order, each {name: node or
        #: None (removed)}; a rename inside one directory is one change (atomic)
        self.entries: list[dict[str, Node | None]] = []
        self.children: dict[str, Node] | None = None  # visible entries; None: not loaded
        self.durable_children: dict[str, Node] = {}
        self.where = ""  # the last path it was seen at (arming, messages)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)


#: partial mode: a file's unsynced operations kept one by one, at most (the older folded)
FOLD_OPS = 512
FOLD_BYTES = 8 * 1024 * 1024


def _apply(content: bytearray, op: tuple[Any, ...]) -> tuple[int, int, int] | None:
    """One logged operation applied to a file's bytes; a ("meta", ...) one returns its
    (mode, uid, gid)."""
    if op[0] == "write":
        _, offset, data = op
        if offset > len(content):
            content.extend(bytes(offset - len(content)))
        content[offset : offset + len(data)] = data
    elif op[0] == "truncate":
        length = op[1]
        if length < len(content):
            del content[length:]
        else:
            content.extend(bytes(length - len(content)))
    else:
        return (op[1], op[2], op[3])
    return None


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def _as_born(real: str, node: Node) -> None:
    """A backing entry made for a node without a durable copy: the mode and owner it was
    created with (its entry carries them; lossyfs runs as root in the tests)."""
    mode, uid, gid = node.born
    if not stat.S_ISLNK(mode):
        os.chmod(real, stat.S_IMODE(mode))
    with contextlib.suppress(PermissionError):
        os.lchown(real, uid, gid)


def _chown(real: str, node: Node) -> None:
    """The backing file given the node's owner (lossyfs runs as root in the tests; as another
    user the owner stays the backing file's)."""
    with contextlib.suppress(PermissionError):
        os.lchown(real, node.uid, node.gid)


class LossyOperations:
    """The filesystem (mfusepy's high-level Operations): one lock, nodes in memory."""

    use_ns = True

    def __init__(self, backing: Path, *, ext4: bool = False, partial: int | None = None) -> None:
        self.backing = backing
        self.ext4 = ext4
        #: partial persistence (None: every unsynced change dropped at a cut): the seed of
        #: the draws of what survives of each file's and directory's unsynced changes
        self.partial = partial
        self._mutex = threading.RLock()
        self.dead = False
        self.inos = itertools.count(2)
        self.stages = itertools.count(1)
        self.nodes: dict[int, Node] = {}
        self.handles: dict[int, Node] = {}
        self.fhs = itertools.count(1)
        self.armed: dict[str, Any] | None = None
        self.cuts: list[dict[str, Any]] = []
        private = backing / PRIVATE
        shutil.rmtree(private, ignore_errors=True)
        private.mkdir(mode=0o700)
        info = os.lstat(backing)
        self.root = self._node(info.st_mode, info.st_uid, info.st_gid)
        self.root.links = {""}
        self.root.where = "/"

    # -- plumbing ----------

    def _node(self, mode: int, uid: int, gid: int) -> Node:
        node = Node(next(self.inos), mode, uid, gid)
        self.nodes[node.ino] = node
        return node

    def _real(self, relative: str) -> str:
        return os.path.join(self.backing, relative) if relative else str(self.backing)

    def _link(self, node: Node) -> str | None:
        """One backing path of the node's durable copy (a named one rather than a private one)."""
        if not node.links:
            return None
        return sorted(node.links, key=lambda link: (link.startswith(PRIVATE + "/"), link))[0]

    def _load(self, directory: Node) -> dict[str, Node]:
        if directory.children is None:
            children: dict[str, Node] = {}
            where = self._link(directory)
            if where is not None:
                for entry in os.scandir(self._real(where)):
                    if not where and entry.name == PRIVATE:
                        continue
                    info = entry.stat(follow_symlinks=False)
                    child = self._node(info.st_mode, info.st_uid, info.st_gid)
                    child.size = info.st_size
                    child.mtime, child.atime, child.ctime = (
                        info.st_mtime_ns,
                        info.st_atime_ns,
                        info.st_ctime_ns,
                    )
                    relative = os.path.join(where, entry.name) if where else entry.name
                    child.links = {relative}
                    child.where = os.path.join(directory.where, entry.name)
                    if stat.S_ISLNK(info.st_mode):
                        child.target = os.readlink(self._real(relative))
                    children[entry.name] = child
            directory.children = children
            directory.durable_children = dict(children)
        return directory.children

    def _lookup(self, path: str) -> Node:
        node = self.root
        for part in [p for p in path.split("/") if p]:
            if not node.is_dir:
                raise _error(errno.ENOTDIR)
            found = self._load(node).get(part)
            if found is None:
                raise _error(errno.ENOENT)
            node = found
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        head, name = os.path.split(path.rstrip("/"))
        parent = self._lookup(head or "/")
        if not parent.is_dir:
            raise _error(errno.ENOTDIR)
        if head in ("", "/") and name == PRIVATE:
            raise _error(errno.EPERM)
        return parent, name

    def _target(self, path: str | None, fh: int | None) -> Node:
        if fh and fh in self.handles:
            return self.handles[fh]
        if path is None:
            raise _error(errno.EBADF)
        return self._lookup(path)

    def _loaded(self, node: Node) -> bytearray:
        if node.data is None:
            where = self._link(node)
            node.data = bytearray(Path(self._real(where)).read_bytes()) if where else bytearray()
            node.size = len(node.data)
        return node.data

    def _enter(self, op: str, node_or_path: Node | str) -> None:
        """Every operation starts here, under the lock: refused after a cut; an armed cut."""
        if self.dead:
            raise _error(errno.EIO)
        self._fire(op, node_or_path, "before")

    def _fire(self, op: str, node_or_path: Node | str, when: str) -> None:
        armed = self.armed
        if armed is None or armed["when"] != when or op not in armed["ops"]:
            return
        path = node_or_path.where if isinstance(node_or_path, Node) else node_or_path
        if not re.search(armed["path"], path):
            return
        armed["seen"] += 1
        if armed["seen"] < armed["nth"]:
            return
        self.armed = None
        self.cut(armed.get("kill"), reason=f"{when} {op} {path} (#{armed['nth']})")
        raise _error(errno.EIO)

    def _leave(self, op: str, node_or_path: Node | str) -> None:
        self._fire(op, node_or_path, "after")

    # -- the power cut ----------

    def _alive(self) -> list[Node]:
        """The nodes a process can still reach: through the tree, or an open handle."""
        seen: dict[int, Node] = {}
        stack = [self.root, *self.handles.values()]
        while stack:
            node = stack.pop()
            if node.ino in seen:
                continue
            seen[node.ino] = node
            if node.children is not None:
                stack.extend(node.children.values())
        return list(seen.values())

    def pending(self) -> dict[str, Any]:
        """What a cut now would drop: files with unsynced bytes, directories with unsynced
        entries (by the path they were last seen at)."""
        alive = self._alive()
        files = sorted(
            n.where
            for n in alive
            if n.is_file and (n.dirty or (n.data is not None and not n.links))
        )
        blocks = sum(len(n.dirty) for n in alive)
        directories = sorted(
            n.where
            for n in alive
            if n.is_dir and n.children is not None and n.children != n.durable_children
        )
        return {"files": files, "blocks": blocks, "directories": directories}

    def cut(self, kill: int | None = None, reason: str = "cut") -> dict[str, Any]:
        with self._mutex:
            if self.dead:
                return {"dropped": None, "reason": "already cut"}
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(kill, signal.SIGKILL)
            dropped = self.pending()
            kept = self._persist_partially() if self.partial is not None else None
            self.dead = True
            self.nodes.clear()
            self.handles.clear()
            self.root = Node(0, stat.S_IFDIR, 0, 0)
            record = {"dropped": dropped, "reason": reason, "killed": kill, "at": time.time()}
            if kept is not None:
                record["kept"] = kept
            self.cuts.append(record)
            return record

    # -- partial persistence (the `partial` mode) ----------

    def _note(self, node: Node, op: tuple[Any, ...]) -> None:
        """A file's unsynced operation, kept in order for a cut's prefix; the oldest folded
        into `base` past FOLD_OPS operations or FOLD_BYTES bytes (a prefix then keeps all of
        the folded ones or none: fewer outcomes, never one a disk could not give)."""
        if self.partial is None or not node.is_file:
            return
        node.log.append(op)
        node.log_bytes += len(op[2]) if op[0] == "write" else 0
        if len(node.log) > FOLD_OPS or node.log_bytes > FOLD_BYTES:
            half = len(node.log) // 2
            if node.base is None:
                node.base = self._durable_bytes(node)
            for folded in node.log[:half]:
                node.base_meta = _apply(node.base, folded) or node.base_meta
            node.log = node.log[half:]
            node.log_bytes = sum(len(o[2]) for o in node.log if o[0] == "write")

    def _durable_bytes(self, node: Node) -> bytearray:
        where = self._link(node)
        return bytearray(Path(self._real(where)).read_bytes()) if where else bytearray()

    def _note_entry(self, directory: Node, change: dict[str, Node | None]) -> None:
        if self.partial is not None:
            directory.entries.append(change)

    def _persist_partially(self) -> dict[str, Any]:
        """At a cut, before everything in memory is dropped: what a disk may have written of
        what was never fsynced. Each file keeps a random prefix of its unsynced operations
        (writes, truncations, chmod/chown), and the first operation past the prefix, if a
        write over several 4 KiB blocks, a random subset of its blocks (a torn write); each
        directory keeps a random prefix of its unsynced entry changes (a rename inside it is
        one change). Files and directories are drawn independently, so what survives is also
        reordered across files. Returns the draws, by path."""
        rng = random.Random(f"{self.partial}-{len(self.cuts)}")
        files: dict[str, str] = {}
        alive = sorted(self._alive(), key=lambda n: n.ino)
        for node in alive:
            if not node.is_file or not (node.log or node.base is not None):
                continue
            count = len(node.log)
            # with folded operations: -1 keeps none of them, 0.. keeps them all and k more
            keep = rng.randint(-1 if node.base is not None else 0, count)
            torn: list[int] = []
            if 0 <= keep < count and node.log[keep][0] == "write":
                _, offset, data = node.log[keep]
                blocks = range(offset // BLOCK, (offset + len(data) - 1) // BLOCK + 1)
                if len(blocks) > 1 and rng.random() < 0.5:  # torn: some of its blocks, not all
                    torn = sorted(rng.sample(blocks, rng.randint(1, len(blocks) - 1)))
            files[node.where] = f"{keep}/{count}" + (f" torn {torn}" if torn else "")
            if keep < 0 or (keep == 0 and node.base is None and not torn):
                continue  # nothing of it reached the disk
            where = self._link(node)
            if node.base is not None and keep >= 0:
                content, meta = bytearray(node.base), node.base_meta
            else:
                content = self._durable_bytes(node)
                meta = None
            for op in node.log[: max(keep, 0)]:
                meta = _apply(content, op) or meta
            if torn:
                _, offset, data = node.log[keep]
                for block in torn:
                    start = max(block * BLOCK, offset)
                    end = min((block + 1) * BLOCK, offset + len(data))
                    _apply(content, ("write", start, data[start - offset : end - offset]))
            if where is None:  # an inode the disk wrote but no entry names yet
                where = f"{PRIVATE}/inode-{node.ino}"
                node.links.add(where)
            real = self._real(where)
            Path(real).touch(mode=0o600)
            fd = os.open(real, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, bytes(content))
            finally:
                os.close(fd)
            if meta is not None:
                os.chmod(real, stat.S_IMODE(meta[0]))
                with contextlib.suppress(PermissionError):
                    os.lchown(real, meta[1], meta[2])
        directories: dict[str, str] = {}
        for node in alive:
            if not node.is_dir or not node.entries:
                continue
            keep = rng.randint(0, len(node.entries))
            directories[node.where] = f"{keep}/{len(node.entries)}"
            survived = dict(node.durable_children)
            for change in node.entries[:keep]:
                for name, child in change.items():
                    if child is None:
                        survived.pop(name, None)
                    else:
                        survived[name] = child
            node.children = survived
            self._sync_dir(node)
        return {"seed": self.partial, "files": files, "directories": directories}

    # -- making things durable ----------

    def _sync_file(self, node: Node) -> None:
        if node.is_dir:
            self._sync_dir(node)
            self._sync_dir_meta(node)
            return
        if not node.is_file:
            return
        if node.data is None and not node.meta_dirty:
            return
        where = self._link(node)
        if where is None:  # fsynced before any durable name: an inode linked nowhere yet
            where = f"{PRIVATE}/inode-{node.ino}"
            Path(self._real(where)).touch(mode=0o600)
            node.links.add(where)
        real = self._real(where)
        if node.data is not None:
            fd = os.open(real, os.O_WRONLY)
            try:
                data = node.data
                for block in sorted(node.dirty):
                    os.pwrite(fd, bytes(data[block * BLOCK : (block + 1) * BLOCK]), block * BLOCK)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
            node.dirty.clear()
        node.log.clear()
        node.log_bytes = 0
        node.base = node.base_meta = None
        os.chmod(real, stat.S_IMODE(node.mode))
        _chown(real, node)  # an owner, like a mode, is durable only once the file is fsynced
        node.meta_dirty = False

    def _sync_dir_meta(self, directory: Node) -> None:
        """A directory's own mode and owner, durable at its fsync (like a file's)."""
        where = self._link(directory)
        if directory.meta_dirty and where is not None:
            os.chmod(self._real(where), stat.S_IMODE(directory.mode))
            _chown(self._real(where), directory)
            directory.meta_dirty = False

    def _sync_dir(self, directory: Node) -> None:
        """The backing directory made to hold exactly the visible entries."""
        if directory.children is None:
            return  # never loaded: nothing changed in it
        where = self._link(directory)
        if where is None:  # a directory not yet durable itself: its entries go with it
            where = f"{PRIVATE}/inode-{directory.ino}"
            os.mkdir(self._real(where), 0o700)
            _as_born(self._real(where), directory)
            directory.links = {where}
        children, durable = directory.children, directory.durable_children
        staged: list[tuple[str, Node, str]] = []
        for name, child in children.items():
            if durable.get(name) is child:
                continue
            stage = f"{PRIVATE}/stage-{next(self.stages)}"
            real_stage = self._real(stage)
            source = self._link(child)
            if child.is_dir:
                if source is not None:  # its entries were fsynced before it had a name
                    os.rename(self._real(source), real_stage)
                    self._move_links(source, stage)
                else:
                    os.mkdir(real_stage, 0o700)
                    _as_born(real_stage, child)
            elif stat.S_ISLNK(child.mode):
                os.symlink(child.target, real_stage)
                _as_born(real_stage, child)
            elif child.is_file:
                if source is not None:  # its durable inode, with its durable mode and owner
                    os.link(self._real(source), real_stage)
                else:  # the entry without its unsynced bytes: an empty file, as created
                    Path(real_stage).touch(mode=0o600)
                    _as_born(real_stage, child)
            else:  # a socket or a fifo
                os.mknod(real_stage, stat.S_IFMT(child.mode) | 0o600)
                _as_born(real_stage, child)
            staged.append((name, child, stage))
        for name, child in durable.items():
            if children.get(name) is child:
                continue
            relative = os.path.join(where, name) if where else name
            real = self._real(relative)
            if child.is_dir and not os.path.islink(real):
                shutil.rmtree(real)
                for node in self.nodes.values():
                    node.links = {
                        link for link in node.links if not link.startswith(relative + "/")
                    }
            else:
                os.unlink(real)
            child.links.discard(relative)
        for name, child, stage in staged:
            relative = os.path.join(where, name) if where else name
            os.rename(self._real(stage), self._real(relative))
            if child.is_dir:
                self._move_links(stage, relative)
            child.links.discard(stage)
            for private in [link for link in child.links if link.startswith(PRIVATE + "/")]:
                if not child.is_dir:
                    os.unlink(self._real(private))
                child.links.discard(private)
            child.links.add(relative)
        directory.durable_children = dict(children)
        directory.entries.clear()

    def _move_links(self, old: str, new: str) -> None:
        for node in self.nodes.values():
            moved = set()
            for link in node.links:
                if link == old:
                    moved.add(new)
                elif link.startswith(old + "/"):
                    moved.add(new + link[len(old) :])
                else:
                    moved.add(link)
            node.links = moved

    # -- the operations (mfusepy's Operations protocol) ----------

    def init(self, path: str) -> None:
        return None

    def destroy(self, path: str) -> None:
        return None

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self._mutex:
            if self.dead:
                raise _error(errno.EIO)
            node = self._target(path, fh)
            if node.is_dir:
                size = 4096
                links = 2 + sum(1 for c in (node.children or {}).values() if c.is_dir)
            else:
                size = len(node.data) if node.data is not None else node.size
                if stat.S_ISLNK(node.mode):
                    size = len(node.target.encode())
                links = 1
            return {
                "st_mode": node.mode,
                "st_nlink": links,
                "st_size": size,
                "st_uid": node.uid,
                "st_gid": node.gid,
                "st_atime": node.atime,
                "st_mtime": node.mtime,
                "st_ctime": node.ctime,
                "st_blocks": (size + 511) // 512,
                "st_blksize": BLOCK,
            }

    def readdir(self, path: str, fh: int) -> list[str]:
        with self._mutex:
            self._enter("readdir", path)
            node = self._lookup(path)
            return [".", "..", *self._load(node)]

    def statfs(self, path: str) -> dict[str, int]:
        with self._mutex:
            self._enter("statfs", path)
            info = os.statvfs(self.backing)
            keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files")
            return {key: getattr(info, key) for key in (*keys, "f_ffree", "f_namemax")}

    def _new(self, path: str, mode: int) -> Node:
        parent, name = self._parent(path)
        children = self._load(parent)
        if name in children:
            raise _error(errno.EEXIST)
        uid, gid, _pid = _context()
        node = self._node(mode, uid, gid)
        node.where = path
        if node.is_dir:
            node.children = {}
        elif node.is_file:
            node.data = bytearray()
        children[name] = node
        self._note_entry(parent, {name: node})
        parent.mtime = parent.ctime = time.time_ns()
        return node

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        with self._mutex:
            self._enter("create", path)
            node = self._new(path, stat.S_IFREG | stat.S_IMODE(mode))
            fh = next(self.fhs)
            self.handles[fh] = node
            self._leave("create", path)
            return fh

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self._mutex:
            self._enter("mknod", path)
            if stat.S_ISREG(mode) or stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                self._new(path, mode)
            else:
                raise _error(errno.EPERM)
            self._leave("mknod", path)
            return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            self._enter("mkdir", path)
            self._new(path, stat.S_IFDIR | stat.S_IMODE(mode))
            self._leave("mkdir", path)
            return 0

    def symlink(self, target: str, source: str) -> int:
        with self._mutex:
            self._enter("symlink", target)
            node = self._new(target, stat.S_IFLNK | 0o777)
            node.target = source
            self._leave("symlink", target)
            return 0

    def readlink(self, path: str) -> str:
        with self._mutex:
            self._enter("readlink", path)
            node = self._lookup(path)
            if not stat.S_ISLNK(node.mode):
                raise _error(errno.EINVAL)
            return node.target

    def link(self, target: str, source: str) -> int:
        raise _error(errno.EPERM)  # no hard links: nothing here makes one

    def unlink(self, path: str) -> int:
        with self._mutex:
            self._enter("unlink", path)
            parent, name = self._parent(path)
            children = self._load(parent)
            node = children.get(name)
            if node is None:
                raise _error(errno.ENOENT)
            if node.is_dir:
                raise _error(errno.EISDIR)
            del children[name]
            self._note_entry(parent, {name: None})
            parent.mtime = parent.ctime = time.time_ns()
            self._leave("unlink", path)
            return 0

    def rmdir(self, path: str) -> int:
        with self._mutex:
            self._enter("rmdir", path)
            parent, name = self._parent(path)
            children = self._load(parent)
            node = children.get(name)
            if node is None:
                raise _error(errno.ENOENT)
            if not node.is_dir:
                raise _error(errno.ENOTDIR)
            if self._load(node):
                raise _error(errno.ENOTEMPTY)
            del children[name]
            self._note_entry(parent, {name: None})
            self._leave("rmdir", path)
            return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            self._enter("rename", f"{old} -> {new}")
            source_dir, source_name = self._parent(old)
            target_dir, target_name = self._parent(new)
            sources = self._load(source_dir)
            targets = self._load(target_dir)
            node = sources.get(source_name)
            if node is None:
                raise _error(errno.ENOENT)
            if node.is_dir:
                raise _error(errno.EXDEV)  # not needed here: `mv` falls back to a copy
            replaced = targets.get(target_name)
            if replaced is node:
                return 0
            if replaced is not None and replaced.is_dir:
                raise _error(errno.EISDIR)
            del sources[source_name]
            targets[target_name] = node
            if source_dir is target_dir:  # one change: the old name gone, the new one there
                self._note_entry(source_dir, {source_name: None, target_name: node})
            else:
                self._note_entry(source_dir, {source_name: None})
                self._note_entry(target_dir, {target_name: node})
            node.where = new
            node.ctime = source_dir.mtime = target_dir.mtime = time.time_ns()
            self._leave("rename", f"{old} -> {new}")
            return 0

    def chmod(self, path: str | None, mode: int) -> int:
        with self._mutex:
            self._enter("chmod", path or "")
            node = self._lookup(path) if path else self.root
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
            node.meta_dirty = True
            self._note(node, ("meta", node.mode, node.uid, node.gid))
            node.ctime = time.time_ns()
            return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        with self._mutex:
            self._enter("chown", path or "")
            node = self._lookup(path) if path else self.root
            if uid != -1 and uid != 0xFFFFFFFF:
                node.uid = uid
            if gid != -1 and gid != 0xFFFFFFFF:
                node.gid = gid
            node.meta_dirty = True
            self._note(node, ("meta", node.mode, node.uid, node.gid))
            return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        with self._mutex:
            self._enter("utimens", path or "")
            node = self._lookup(path) if path else self.root
            now = time.time_ns()
            node.atime, node.mtime = times if times is not None else (now, now)
            return 0

    def open(self, path: str, flags: int) -> int:
        with self._mutex:
            self._enter("open", path)
            node = self._lookup(path)
            if flags & os.O_TRUNC and node.is_file:
                self._truncate(node, 0)
            fh = next(self.fhs)
            self.handles[fh] = node
            return fh

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            if self.dead:
                raise _error(errno.EIO)
            node = self._target(path, fh)
            if node.data is not None:
                return bytes(node.data[offset : offset + size])
            where = self._link(node)
            if where is None:
                return b""
            fd = os.open(self._real(where), os.O_RDONLY)
            try:
                return os.pread(fd, size, offset)
            finally:
                os.close(fd)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            node = self._target(path, fh) if not self.dead else None
            self._enter("write", node or "")
            assert node is not None
            buffer = self._loaded(node)
            end = offset + len(data)
            if offset > len(buffer):  # a hole: zeroes, changed too
                self._mark(node, len(buffer), offset)
                buffer.extend(bytes(offset - len(buffer)))
            buffer[offset:end] = data
            self._mark(node, offset, end)
            self._note(node, ("write", offset, bytes(data)))
            node.mtime = node.ctime = time.time_ns()
            self._leave("write", node)
            return len(data)

    def _mark(self, node: Node, start: int, end: int) -> None:
        if end > start:
            node.dirty.update(range(start // BLOCK, (end - 1) // BLOCK + 1))

    def _truncate(self, node: Node, length: int) -> None:
        buffer = self._loaded(node)
        old = len(buffer)
        if length < old:
            del buffer[length:]
            if length % BLOCK:
                self._mark(node, length, length + 1)  # the block the new end falls in
        elif length > old:
            buffer.extend(bytes(length - old))
            self._mark(node, old, length)
        node.dirty = {block for block in node.dirty if block * BLOCK < max(length, 1)}
        self._note(node, ("truncate", length))
        node.mtime = node.ctime = time.time_ns()

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._mutex:
            node = self._target(path, fh) if not self.dead else None
            self._enter("truncate", node or "")
            assert node is not None
            if node.is_dir:
                raise _error(errno.EISDIR)
            self._truncate(node, length)
            self._leave("truncate", node)
            return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        with self._mutex:
            node = self._target(path, fh) if not self.dead else None
            self._enter("fallocate", node or "")
            assert node is not None
            if mode:
                raise _error(errno.EOPNOTSUPP)
            if offset + size > len(self._loaded(node)):
                self._truncate(node, offset + size)
            return 0

    def flush(self, path: str | None, fh: int) -> int:
        with self._mutex:
            if self.dead:
                raise _error(errno.EIO)
            return 0

    def release(self, path: str | None, fh: int) -> int:
        with self._mutex:
            self.handles.pop(fh, None)
            return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            node = self._target(path, fh) if not self.dead else None
            self._enter("fsync", node or "")
            assert node is not None
            self._sync_file(node)
            if self.ext4:  # one journal commit carries every entry changed so far
                for directory in self._alive():
                    if directory.is_dir:
                        self._sync_dir(directory)
            self._leave("fsync", node)
            return 0

    def opendir(self, path: str) -> int:
        with self._mutex:
            self._enter("opendir", path)
            node = self._lookup(path)
            if not node.is_dir:
                raise _error(errno.ENOTDIR)
            fh = next(self.fhs)
            self.handles[fh] = node
            return fh

    def releasedir(self, path: str | None, fh: int) -> int:
        return self.release(path, fh)

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            node = self._target(path, fh) if not self.dead else None
            self._enter("fsyncdir", node or "")
            assert node is not None
            self._sync_dir(node)
            self._sync_dir_meta(node)
            self._leave("fsyncdir", node)
            return 0

    def access(self, path: str, amode: int) -> int:
        with self._mutex:
            if self.dead:
                raise _error(errno.EIO)
            self._lookup(path)
            return 0


def _context() -> tuple[int, int, int]:
    import mfusepy

    uid, gid, pid = mfusepy.fuse_get_context()
    return int(uid), int(gid), int(pid)


# -- the control socket ----------


def serve_control(operations: LossyOperations, path: Path) -> socketserver.UnixStreamServer:
    """JSON lines: {"do": "ping" | "pending" | "cut" | "arm" | "cuts", ...}; one answer each.

    cut: {"kill": PID} to SIGKILL at the cut. arm: {"ops": [...], "path": REGEX, "nth": N,
    "when": "before" | "after", "kill": PID}: the Nth matching operation cuts the power.
    """

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                request = json.loads(line)
                action = request.get("do")
                answer: dict[str, Any]
                if action == "ping":
                    answer = {"ok": True, "dead": operations.dead}
                elif action == "pending":
                    with operations._mutex:
                        answer = {"ok": True, **operations.pending()}
                elif action == "cut":
                    answer = {"ok": True, **operations.cut(request.get("kill"))}
                elif action == "arm":
                    with operations._mutex:
                        operations.armed = {
                            "ops": list(request["ops"]),
                            "path": request["path"],
                            "nth": int(request.get("nth", 1)),
                            "when": request.get("when", "before"),
                            "kill": request.get("kill"),
                            "seen": 0,
                        }
                    answer = {"ok": True}
                elif action == "disarm":
                    with operations._mutex:
                        operations.armed = None
                    answer = {"ok": True}
                elif action == "cuts":
                    answer = {"ok": True, "cuts": operations.cuts}
                else:
                    answer = {"ok": False, "error": f"unknown request {action!r}"}
                self.wfile.write((json.dumps(answer) + "\n").encode())
                self.wfile.flush()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="control").start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument(
        "--ext4",
        action="store_true",
        help="an fsync of a file also makes every directory entry changed so far durable",
    )
    parser.add_argument(
        "--partial",
        type=int,
        default=None,
        metavar="SEED",
        help="a cut keeps a random prefix of each file's and directory's unsynced changes "
        "(drawn from SEED) instead of dropping them all",
    )
    parser.add_argument(
        "--allow-other",
        action="store_true",
        help="let users other than the one mounting use the mount (root mounts it: no "
        "user_allow_other needed in /etc/fuse.conf)",
    )
    args = parser.parse_args(argv)
    import mfusepy

    operations = LossyOperations(args.backing.resolve(), ext4=args.ext4, partial=args.partial)
    serve_control(operations, args.control)
    mfusepy.FUSE(
        operations,
        str(args.mountpoint),
        foreground=True,
        nothreads=False,
        hard_remove=True,
        default_permissions=True,
        # other users reach the mount (the daemon as its service user); the kernel checks
        # each access against the modes and owners lossyfs reports (default_permissions)
        **({"allow_other": True} if args.allow_other else {}),
        fsname="lossyfs",
        subtype="lossyfs",
    )
    return 0


# -- from a test ----------


def fuse_missing() -> str | None:
    """Why lossyfs cannot run here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian's fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"mfusepy cannot load libfuse 3: {error}"
    return None


class LossyMount:
    """A lossyfs process mounted on `mountpoint` over `backing`; driven through its control
    socket. `cut()` is the power cut; `remount()` a new mount on what survived."""

    def __init__(
        self,
        backing: Path,
        mountpoint: Path,
        control: Path | None = None,
        *,
        ext4: bool = False,
        partial: int | None = None,
        allow_other: bool = False,
    ) -> None:
        self.backing = backing
        self.ext4 = ext4
        #: other users may use the mount (the daemon run as an unprivileged user)
        self.allow_other = allow_other
        #: partial persistence's seed for the next mount (None: a cut drops every unsynced
        #: change); a test may change it before `remount`
        self.partial = partial
        self.mountpoint = mountpoint
        self.control = control or mountpoint.parent / f".{mountpoint.name}.control"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = mountpoint.parent / f".{mountpoint.name}.lossyfs.log"

    def mount(self) -> LossyMount:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.control.unlink()
        root = Path(__file__).resolve().parents[2]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.powercut.lossyfs",
                    str(self.backing),
                    str(self.mountpoint),
                    "--control",
                    str(self.control),
                    *(["--ext4"] if self.ext4 else []),
                    *(["--allow-other"] if self.allow_other else []),
                    *(["--partial", str(self.partial)] if self.partial is not None else []),
                ],
                cwd=root,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 15
        while not (os.path.ismount(self.mountpoint) and self.control.exists()):
            if self.process.poll() is not None:
                raise RuntimeError(f"lossyfs exited {self.process.returncode}: {self.log_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"lossyfs did not mount in 15 s: {self.log_text()}")
            time.sleep(0.02)
        self.ask({"do": "ping"})
        return self

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(self.control))
            sock.sendall((json.dumps(request) + "\n").encode())
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        answer: dict[str, Any] = json.loads(reply)
        return answer

    def cut(self, kill: int | None = None) -> dict[str, Any]:
        """The power goes: `kill` SIGKILLed and the unsynced writes dropped in one step."""
        return self.ask({"do": "cut", "kill": kill})

    def arm(
        self,
        ops: list[str],
        path: str,
        *,
        nth: int = 1,
        when: str = "before",
        kill: int | None = None,
    ) -> None:
        self.ask({"do": "arm", "ops": ops, "path": path, "nth": nth, "when": when, "kill": kill})

    def pending(self) -> dict[str, Any]:
        return self.ask({"do": "pending"})

    def cuts(self) -> list[dict[str, Any]]:
        cuts: list[dict[str, Any]] = self.ask({"do": "cuts"})["cuts"]
        return cuts

    def unmount(self) -> None:
        """Unmount (lazily when a process still holds a file open, as after a cut) and end the
        lossyfs process."""
        if self.process is None:
            return
        for _ in range(10):
            done = subprocess.run(
                ["fusermount3", "-u", str(self.mountpoint)], capture_output=True, check=False
            )
            if done.returncode == 0:
                break
            time.sleep(0.05)
        else:
            subprocess.run(
                ["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, check=False
            )
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def remount(self) -> LossyMount:
        self.unmount()
        return self.mount()

    def __enter__(self) -> LossyMount:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()


if __name__ == "__main__":
    sys.exit(main())
