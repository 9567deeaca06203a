"""Reading files that come from elsewhere (EMPA's download, result folders) without trusting them.

`read_bytes` reads only a regular file, and at most `limit` bytes of it: a FIFO, a device (a link to
/dev/zero), a socket or a folder is refused before anything is read, so a reader never hangs nor fills
the memory. Given `inside`, the file must resolve (symlinks followed) to a path inside that folder.
A refusal is a `FileRefused` (a ValueError) with the problem and the fix; the caller names the file and
field in its own error type. A file that is not there or cannot be opened raises the OSError as usual.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

MIB = 1 << 20
KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class FileRefused(ValueError):
    """A file the reader will not read: `problem` (after the path) and `fix`."""

    def __init__(self, path: Path, problem: str, fix: str):
        self.path, self.problem, self.fix = path, problem, fix
        super().__init__(f"{path}: {problem}; fix: {fix}")


def _mib(n: int) -> str:
    return f"{n / MIB:.0f}" if n >= MIB else f"{n / MIB:.2f}"


def resolved(path: str | Path) -> Path:
    """The absolute path with every symlink followed; a loop of links is an OSError (not RuntimeError)."""
    try:
        return Path(path).resolve()
    except RuntimeError as err:       # Python < 3.13: a symlink loop
        raise OSError(f"{path}: cannot be resolved ({err})") from None


def is_inside(path: str | Path, folder: str | Path) -> bool:
    real, root = resolved(path), resolved(folder)
    return real == root or root in real.parents


def read_bytes(path: str | Path, limit: int, what: str = "this file", inside: str | Path | None = None,
               inside_name: str = "the folder it belongs to") -> bytes:
    """At most `limit` bytes of the regular file `path` (see the module's docstring)."""
    path = Path(path)
    if inside is not None and not is_inside(path, inside):
        raise FileRefused(path, f"is a link to {resolved(path)}, outside {inside_name} {resolved(inside)}",
                          f"replace the link by the file itself, inside {inside_name}")
    # O_NONBLOCK: opening a FIFO for reading does not wait for a writer; fstat then says what it is
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in KINDS if test(info.st_mode)), "no regular file")
            raise FileRefused(path, f"is not a regular file ({kind}), so it is not read",
                              f"put {what} there as a plain file")
        if info.st_size > limit:
            raise FileRefused(path, f"is {_mib(info.st_size)} MiB, more than {what} may have ({_mib(limit)} MiB)",
                              f"check that it is {what}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(MIB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:                                    # it grew while being read
            raise FileRefused(path, f"is more than {what} may have ({_mib(limit)} MiB)", f"check that it is {what}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int, what: str = "this file", inside: str | Path | None = None,
              inside_name: str = "the folder it belongs to") -> str:
    """read_bytes decoded as UTF-8 (a UnicodeDecodeError, a ValueError, when it is not), with universal
    newlines like Path.read_text: \\r\\n and \\r become \\n (EMPA's case prompts use \\r\\n)."""
    text = read_bytes(path, limit, what, inside, inside_name).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
