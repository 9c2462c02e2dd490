"""Files that are whole or absent, and damaged files kept for a post-mortem.

Why here: the state file's writer and its reader both need them, and a copy of each in two
modules had drifted before (a shared temporary name tore the file under concurrent saves).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

MAX_KEPT = 99  # copies of damaged files kept beside the state (never overwritten)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a write refused for want of room


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before, whatever happens: a unique temporary
    file (no two writers share one), fsync'ed before the rename, the directory after it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def keep_aside(path: Path, suffix: str, copy: bool = False) -> str:
    """Keep ``path`` as it is now under ``<path><suffix>`` (``.2``, ``.3``... if taken): a hard
    link, so it costs no space on a full disk and survives the original being replaced (a file
    that will change in place is copied instead). Returns a note saying where it went (or why
    it could not)."""
    for n in range(1, MAX_KEPT + 1):
        aside = path.with_name(f"{path.name}{suffix}" + (f".{n}" if n > 1 else ""))
        try:
            if copy:
                with aside.open("xb") as f:
                    f.write(path.read_bytes())
            else:
                os.link(path, aside)
        except FileExistsError:
            continue
        except OSError as exc:
            return f"could not keep {path.name} for a post-mortem: {exc}"
        return f"kept as {aside}"
    return f"not kept: {MAX_KEPT} copies of {path.name}{suffix} exist already"
