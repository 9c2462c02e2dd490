"""Load a BPF object with libbpf and attach its program to a port's clsact egress hook.

Why not ``tc filter add ... bpf obj FILE``: tc's loader refuses to load without a BPF
filesystem it can write ``<bpffs>/tc/globals`` into, and it finds that filesystem by
reading ``/proc/mounts``. In a Mininet node that listing lies: ``mnexec`` mounts a fresh
sysfs over ``/sys`` without unmounting the old one, so on a host where systemd mounted a
bpffs at ``/sys/fs/bpf`` the node still lists it while the path is now plain sysfs, and tc
fails. Where no bpffs exists, tc mounts one itself (in the root mount namespace, for a shim
run there). The egress program pins nothing, so none of that is needed: libbpf
(``libbpf.so.1``, the library tc and bpftool use) loads the object straight into the kernel
and the filter is attached by file descriptor over netlink (pyroute2). Whatever bpffs the
host has — none, systemd's, one with stale pins — is never looked at, mounted or written.

The program and its maps live as long as the filter that holds them: removing the clsact
qdisc (or the interface, or the namespace) frees them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path

# tc's "parent ffff:fff3": the egress hook of a clsact qdisc (TC_H_CLSACT, TC_H_MIN_EGRESS)
CLSACT_EGRESS = 0xFFFFFFF3
LOG_BYTES = 1 << 20  # the verifier's log of a refused program (it names the instruction)
LIBBPF_ERRNO_BASE = 4000  # libbpf's own error codes (a bad ELF, ...) start here, strerror knows none
LIBBPF_WARN = 0  # enum libbpf_print_level: LIBBPF_WARN, LIBBPF_INFO, LIBBPF_DEBUG


class BpfLoadError(OSError):
    """libbpf or the kernel refused the object; the message says what and why."""


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_messages = threading.local()  # libbpf's warnings during the calling thread's load


def _print_libbpf_message(level: int, fmt: bytes, args: int) -> int:
    """libbpf's print callback: its warnings go with the load that caused them, not to stderr."""
    if level != LIBBPF_WARN or not fmt:
        return 0
    buf = ctypes.create_string_buffer(1024)
    _libc().vsnprintf(buf, len(buf), fmt, ctypes.c_void_p(args))
    lines = getattr(_messages, "lines", None)
    if lines is not None:
        lines.append(buf.value.decode(errors="replace").strip())
    return 0


_on_libbpf_message = _PRINT_FN(_print_libbpf_message)  # kept alive: libbpf holds the pointer
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def libbpf() -> ctypes.CDLL:
    """libbpf.so.1 with the few functions used here typed; raises BpfLoadError without it."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        name = ctypes.util.find_library("bpf") or "libbpf.so.1"
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError as exc:
            raise BpfLoadError(f"libbpf ({name}) cannot be loaded: {exc} (apt-get install libbpf1)") from exc
        ptr, cstr = ctypes.c_void_p, ctypes.c_char_p
        lib.bpf_object__open_file.restype, lib.bpf_object__open_file.argtypes = ptr, [cstr, ptr]
        lib.bpf_object__load.restype, lib.bpf_object__load.argtypes = ctypes.c_int, [ptr]
        lib.bpf_object__close.restype, lib.bpf_object__close.argtypes = None, [ptr]
        find = lib.bpf_object__find_program_by_name
        find.restype, find.argtypes = ptr, [ptr, cstr]
        lib.bpf_program__fd.restype, lib.bpf_program__fd.argtypes = ctypes.c_int, [ptr]
        set_log = lib.bpf_program__set_log_buf
        set_log.restype, set_log.argtypes = ctypes.c_int, [ptr, ctypes.c_char_p, ctypes.c_size_t]
        lib.libbpf_set_print.restype, lib.libbpf_set_print.argtypes = ptr, [_PRINT_FN]
        lib.libbpf_set_print(_on_libbpf_message)
        _lib = lib
        return lib


@dataclass
class LoadedObject:
    """An opened and loaded BPF object; :meth:`close` drops this process's references (an
    attached program and its maps stay while the kernel holds them)."""

    handle: int
    program_fd: int

    def close(self) -> None:
        if self.handle:
            libbpf().bpf_object__close(self.handle)
            self.handle, self.program_fd = 0, -1


def _failure(what: str, err: int, log: bytes = b"") -> BpfLoadError:
    said = list(getattr(_messages, "lines", []) or [])
    verifier = log.rstrip(b"\0").decode(errors="replace").strip().splitlines()[-12:]
    detail = "; ".join(s for s in said if s)[-1500:]
    text = f"{what}: {os.strerror(err)}" if 0 < err < LIBBPF_ERRNO_BASE else what
    if detail:
        text += f" ({detail})"
    if verifier:
        text += "\nthe kernel's verifier said:\n" + "\n".join(verifier)
    return BpfLoadError(err, text)


def load_object(path: Path, program: str) -> LoadedObject:
    """Open and load ``path`` (maps created, every program verified); the fd of ``program``."""
    lib = libbpf()
    _messages.lines = []
    log = ctypes.create_string_buffer(LOG_BYTES)
    try:
        handle = lib.bpf_object__open_file(os.fsencode(path), None)
        if not handle:
            raise _failure(f"libbpf cannot open {path}", ctypes.get_errno())
        prog = lib.bpf_object__find_program_by_name(handle, program.encode())
        if not prog:
            lib.bpf_object__close(handle)
            raise BpfLoadError(f"{path} has no program named {program}")
        lib.bpf_program__set_log_buf(prog, log, LOG_BYTES)  # filled only when the verifier refuses
        ret = lib.bpf_object__load(handle)
        if ret != 0:
            lib.bpf_object__close(handle)
            raise _failure(f"the kernel refused {path}", -ret, log.value)
        return LoadedObject(handle, lib.bpf_program__fd(prog))
    finally:
        _messages.lines = None


def attach_egress(dev: str, program_fd: int, name: str) -> None:
    """``program_fd`` as a direct-action cls_bpf filter on ``dev``'s clsact egress hook (the
    clsact qdisc must be there), in the calling thread's network namespace."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=dev)
        if not index:
            raise BpfLoadError(f"{dev}: no such interface in this network namespace")
        try:
            ipr.tc("add-filter", "bpf", index[0], ":1", fd=program_fd, name=name,
                   parent=CLSACT_EGRESS, direct_action=True)  # fmt: skip
        except NetlinkError as exc:
            raise BpfLoadError(exc.code, f"{dev}: attaching {name} at clsact egress: {exc}") from exc


def load_and_attach(path: Path, program: str, devs: list[str]) -> None:
    """One instance of ``program`` from ``path`` (its own maps) on each of ``devs``."""
    for dev in devs:
        loaded = load_object(path, program)
        try:
            attach_egress(dev, loaded.program_fd, program)
        finally:
            loaded.close()
