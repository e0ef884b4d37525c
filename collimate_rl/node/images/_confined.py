"""A directory that only ever changes inside itself: the root an untrusted layer is unpacked into.

Every path an entry names is resolved by the kernel with ``openat2(2)`` relative
to a directory fd of the root, with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV``: no ``..`` out of the root, no
absolute jump, no symlink, no mount crossing, whatever the layer planted
earlier. Only the parent directory is resolved that way; the entry itself is
then created with an ``*at`` call on that directory fd that never follows a
final symlink (``O_CREAT | O_EXCL | O_NOFOLLOW``, ``mkdirat``, ``symlinkat``,
``linkat`` without ``AT_SYMLINK_FOLLOW``, ``mknodat``), so no string prefix
check stands between a layer and the host.

A parent directory that is a symlink inside the layer is refused
(:class:`~collimate_rl.node.images.errors.LayerError`), not followed, not even
inside the root. A layer made by any image builder never routes an entry
through a symlink: tar records a symlink as a symlink and the files below its
target under their real path, so only a crafted layer does; following it "in
the root" would also write somewhere other than where the entry's name says.

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> root = ConfinedRoot(tmp.name)
>>> fd = root.create_file(("etc", "hostname"), 0o644)
>>> os.write(fd, b"box\\n"), os.close(fd)
(4, None)
>>> root.symlink(("escape",), "/etc")
>>> root.create_file(("escape", "passwd"), 0o644)
Traceback (most recent call last):
...
collimate_rl.node.images.errors.LayerError: the layer routes 'escape' through a symlink...
>>> root.close(); tmp.cleanup()
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from types import TracebackType

from collimate_rl.node.images.errors import LayerError

__all__ = ["OPAQUE_XATTR", "ConfinedRoot", "openat2_beneath"]

#: The xattr that makes a lower directory opaque for overlayfs mounted with ``userxattr``
#: (the node's sandboxes mount their overlays that way, unprivileged in a user namespace;
#: ``trusted.overlay.opaque`` is ignored there, and setting it needs CAP_SYS_ADMIN).
OPAQUE_XATTR = "user.overlay.opaque"

_SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
_RESOLVE_NO_XDEV = 0x01
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_CONFINED = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_XDEV
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def openat2_beneath(dir_fd: int, path: str, flags: int = _DIR_FLAGS) -> int:
    """``openat2(dir_fd, path, flags)`` resolved beneath ``dir_fd``, through no symlink.

    Raises OSError as ``openat(2)`` does; ``ELOOP`` for a symlink on the way,
    ``EXDEV`` for a way out (``..`` above the root, an absolute path, a mount).
    """
    how = _OpenHow(flags, 0, _CONFINED)
    raw = os.fsencode(path)
    fd = _syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(raw),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


class ConfinedRoot:
    """Creates, replaces and removes entries of a layer inside one directory, and nowhere else.

    Paths are tuples of clean components (no ``""``, ``"."``, ``".."`` or ``"/"``):
    the caller (the unpacker) has already turned the tar's name into that or refused it.
    Missing parent directories are created ``0755``, as tar does.

    Args:
        path: the root; it must exist and be a directory.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.fd = os.open(path, _DIR_FLAGS | os.O_NOFOLLOW)
        self._umask = _current_umask()
        # The directory last resolved: tar lists a directory's entries together, so most
        # entries reuse it. Anything removed drops it (it may have been that directory).
        self._last: tuple[tuple[str, ...], int] | None = None

    def close(self) -> None:
        self._forget()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ConfinedRoot:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- resolving -------------------------------------------------------------------------

    def _forget(self) -> None:
        if self._last is not None:
            os.close(self._last[1])
            self._last = None

    def dir_fd(self, parts: tuple[str, ...], *, create: bool = True) -> int:
        """A directory fd for ``parts`` (the root for ``()``), creating missing directories.

        The fd belongs to this object (do not close it); it stays valid until the next call.
        """
        if not parts:
            return self.fd
        if self._last is not None and self._last[0] == parts:
            return self._last[1]
        fd = self._open_dir(parts, create)
        self._forget()
        self._last = (parts, fd)
        return fd

    def parent_fd(self, parts: tuple[str, ...]) -> tuple[int, str]:
        """``(fd of the parent directory, final name)`` of an entry's path."""
        return self.dir_fd(parts[:-1]), parts[-1]

    def _open_dir(self, parts: tuple[str, ...], create: bool) -> int:
        if not parts:
            return os.dup(self.fd)
        try:
            return openat2_beneath(self.fd, "/".join(parts))
        except OSError as exc:
            if exc.errno == errno.ENOENT and create:
                return self._make_dirs(parts)
            raise self._refusal(parts, exc) from exc

    def _make_dirs(self, parts: tuple[str, ...]) -> int:
        # Walk down one component at a time from the deepest existing one; each step is
        # confined on its own (the parent fd came from openat2, the child is made with mkdirat).
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(parts):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                try:
                    child = openat2_beneath(fd, name)
                except OSError as exc:
                    raise self._refusal(parts[: i + 1], exc) from exc
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _refusal(parts: tuple[str, ...], exc: OSError) -> BaseException:
        where = "/".join(parts)
        if exc.errno == errno.ELOOP:
            return LayerError(
                f"the layer routes {where!r} through a symlink; entries are never written "
                "through links (the layer is crafted or corrupt)"
            )
        if exc.errno == errno.ENOTDIR:
            return LayerError(f"the layer puts an entry below {where!r}, which is not a directory")
        if exc.errno == errno.EXDEV:
            return LayerError(f"the layer's path {where!r} leads out of the layer")
        return exc

    # -- creating --------------------------------------------------------------------------

    def _clear(self, dir_fd: int, name: str, *, keep_dir: bool = False) -> bool:
        """Remove ``name`` so an entry can take its place; True when a directory was kept."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(st.st_mode):
            if keep_dir:
                return True
            self._forget()
            remove_tree(dir_fd, name)
        else:
            os.unlink(name, dir_fd=dir_fd)
        return False

    def create_file(self, parts: tuple[str, ...], mode: int) -> int:
        """A new regular file with ``mode``, opened for writing (whatever was there is replaced).

        The fd is writable whatever ``mode`` says (the creator's open is not checked).
        """
        dir_fd, name = self.parent_fd(parts)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, mode, dir_fd=dir_fd)
        except FileExistsError:
            self._clear(dir_fd, name)
            dir_fd, name = self.parent_fd(parts)
            fd = os.open(name, flags, mode, dir_fd=dir_fd)
        if mode & self._umask:  # the umask took bits the image wants (g+w, say)
            os.chmod(fd, mode)
        return fd

    def mkdir(self, parts: tuple[str, ...], mode: int) -> None:
        """A directory with ``mode`` (an existing directory keeps its content)."""
        if not parts:
            os.chmod(self.fd, mode)
            return
        dir_fd, name = self.parent_fd(parts)
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
            if not mode & self._umask:
                return
        except FileExistsError:
            if not self._clear(dir_fd, name, keep_dir=True):
                dir_fd, name = self.parent_fd(parts)
                os.mkdir(name, mode, dir_fd=dir_fd)
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            os.chmod(fd, mode)  # an existing directory, or bits the umask took
        finally:
            os.close(fd)

    def symlink(self, parts: tuple[str, ...], target: str) -> None:
        """A symlink to ``target``: stored as text, never followed by the unpacker."""
        dir_fd, name = self.parent_fd(parts)
        try:
            os.symlink(target, name, dir_fd=dir_fd)
        except FileExistsError:
            self._clear(dir_fd, name)
            dir_fd, name = self.parent_fd(parts)
            os.symlink(target, name, dir_fd=dir_fd)

    def hardlink(self, parts: tuple[str, ...], target: tuple[str, ...]) -> None:
        """A hard link to ``target``, an entry already inside this root.

        Raises:
            LayerError: the target is not in this root (a path out, or a file of another
                layer), or is a directory.
        """
        try:
            src_fd = self._open_dir(target[:-1], create=False)
        except OSError as exc:
            raise LayerError(
                f"the layer links {'/'.join(parts)!r} to {'/'.join(target)!r}, which is not an "
                "earlier entry of this layer"
            ) from exc
        try:
            try:
                st = os.stat(target[-1], dir_fd=src_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is None or stat.S_ISDIR(st.st_mode):
                raise LayerError(
                    f"the layer links {'/'.join(parts)!r} to {'/'.join(target)!r}, which is not "
                    "an earlier file of this layer"
                )
            if target == parts:
                return  # a link to itself: already there
            dir_fd, name = self.parent_fd(parts)
            self._clear(dir_fd, name)
            dir_fd, name = self.parent_fd(parts)
            os.link(target[-1], name, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        finally:
            os.close(src_fd)

    def whiteout(self, parts: tuple[str, ...]) -> bool:
        """An overlay whiteout (a 0:0 character device) at ``parts``; False if an entry is there.

        A whiteout hides its name in the layers below; an entry of this same layer
        with that name wins over it (the OCI image spec), so it is left alone.
        """
        dir_fd, name = self.parent_fd(parts)
        try:
            os.mknod(name, stat.S_IFCHR | 0o000, os.makedev(0, 0), dir_fd=dir_fd)
        except FileExistsError:
            return False
        return True

    def make_opaque(self, parts: tuple[str, ...]) -> None:
        """Mark the directory ``parts`` opaque: overlayfs shows none of the layers below it."""
        fd = self._open_dir(parts, create=True)
        try:
            os.setxattr(fd, OPAQUE_XATTR, b"y")
        finally:
            os.close(fd)


def _current_umask() -> int:
    """The process's umask, read without changing it (``os.umask`` would, for all threads)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o7777  # unknown: every mode gets its chmod


def remove_tree(dir_fd: int, name: str) -> None:
    """Remove the directory ``name`` of ``dir_fd`` and all below it, following no symlink."""
    fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        with os.scandir(fd) as entries:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in children:
            if is_dir:
                remove_tree(fd, child)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
