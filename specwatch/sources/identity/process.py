"""Find the server process behind a URL on this machine and read its code identity from /proc.

Only a server on this machine is looked at (``localhost``, ``127.x``, ``::1`` or one of this
machine's addresses). The process listening on the URL's port is found through
``/proc/net/tcp{,6}`` (socket inode) and ``/proc/*/fd``; its children (GPU workers, which load
NCCL) through the parent ids in ``/proc/*/stat``. Reads are bounded in size and by one
deadline; every failure becomes a note on the identity, never an exception. :func:`identify`
adds a native server's own build id: one function for the live session, the TUI's benchmark and
``probe``, run off the UI thread.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from specwatch.core.identity import ServerIdentity, scrub_identity, with_build_info
from specwatch.core.launch_config import server_argv
from specwatch.core.redaction import redact_argv
from specwatch.core.sanitize import sanitize_line
from specwatch.core.server import Dialect, ServerInfo
from specwatch.core.server_env import merge_environments
from specwatch.sources.identity.code_origin import (
    Deadline,
    loaded_libraries,
    python_package,
    read_checkout,
    site_dirs,
)

PROC = Path("/proc")
MAX_CMDLINE = 64 * 1024
MAX_ARGS = 512
MAX_ARG = 4096
MAX_ENVIRON = 512 * 1024
MAX_MAPS = 8 * 1024 * 1024
MAX_TREE = 256
DEFAULT_DEADLINE_S = 5.0
READ_CHUNK = 64 * 1024

NOTE_REMOTE = "remote server: the process identity is read only for a server on this machine"


def _read(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes of a ``/proc`` file, read in chunks: ``/proc`` reports no size,
    and ``read(limit)`` allocates ``limit`` bytes first (16 MiB for a 2 KB socket table)."""
    chunks: list[bytes] = []
    left = limit
    try:
        with path.open("rb", buffering=0) as fh:
            while left > 0 and (chunk := fh.read(min(left, READ_CHUNK))):
                chunks.append(chunk)
                left -= len(chunk)
    except OSError:
        return None
    return b"".join(chunks)


def _resolve(host: str, timeout: float) -> list[str]:
    """The addresses of a host name, given up after ``timeout`` (getaddrinfo has no timeout)."""
    out: list[str] = []

    def work() -> None:
        with contextlib.suppress(OSError):
            out.extend(str(info[4][0]) for info in socket.getaddrinfo(host, None))

    thread = threading.Thread(target=work, daemon=True, name="specwatch-resolve")
    thread.start()
    thread.join(timeout)
    return list(out) if not thread.is_alive() else []


def _is_local_address(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((text, 0))  # binding succeeds only for an address of this machine
    except OSError:
        return False
    return True


def is_local_host(host: str, timeout: float = 1.0) -> bool:
    """Whether ``host`` names this machine."""
    name = host.strip("[]").lower()
    if name in ("localhost", "ip6-localhost", "ip6-loopback") or name.endswith(".localhost"):
        return True
    if _is_local_address(name):
        return True
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        return False
    except ValueError:
        pass
    if name == socket.gethostname().lower():
        return True
    addresses = _resolve(name, timeout)
    return bool(addresses) and all(_is_local_address(a) for a in addresses)


def listening_sockets(port: int) -> list[tuple[int, int]]:
    """``(inode, uid)`` of each TCP socket listening on ``port`` in this network namespace."""
    found: list[tuple[int, int]] = []
    for table in ("tcp", "tcp6"):
        data = _read(PROC / "net" / table, 16 * 1024 * 1024)
        if data is None:
            continue
        for line in data.decode("ascii", "replace").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                continue
            try:
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                uid, inode = int(fields[7]), int(fields[9])
            except (ValueError, IndexError):
                continue
            if local_port == port and inode:
                found.append((inode, uid))
    return found


def _pids() -> list[int]:
    try:
        return sorted(int(e.name) for e in os.scandir(PROC) if e.name.isdigit())
    except OSError:
        return []


def socket_owners(inodes: set[int], deadline: Deadline) -> list[int]:
    """The processes holding one of the socket inodes (those whose fds can be read)."""
    targets = {f"socket:[{inode}]" for inode in inodes}
    owners: list[int] = []
    for pid in _pids():
        if deadline.expired():
            break
        try:
            entries = list(os.scandir(PROC / str(pid) / "fd"))
        except OSError:
            continue
        for entry in entries:
            try:
                if os.readlink(entry.path) in targets:
                    owners.append(pid)
                    break
            except OSError:
                continue
    return owners


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name (field 3 onwards)."""
    data = _read(PROC / str(pid) / "stat", 4096)
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    return text[text.rfind(")") + 2 :].split()


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 1 and fields[1].isdigit():
            parents[pid] = int(fields[1])
    return parents


def process_tree(root: int, parents: dict[int, int] | None = None) -> list[int]:
    """``root`` and its descendants, breadth first, at most :data:`MAX_TREE`."""
    parents = _parents() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    tree = [root]
    i = 0
    while i < len(tree) and len(tree) < MAX_TREE:
        tree.extend(sorted(children.get(tree[i], []))[: MAX_TREE - len(tree)])
        i += 1
    return tree


def start_time(pid: int) -> float | None:
    """Unix time ``pid`` started (``/proc/PID/stat`` field 22 plus the boot time)."""
    fields = _stat_fields(pid)
    stat = _read(PROC / "stat", 1 << 20)
    if not fields or len(fields) < 20 or stat is None:
        return None
    boot = next(
        (ln.split()[1] for ln in stat.decode().splitlines() if ln.startswith("btime ")), None
    )
    try:
        return float(boot or "") + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return None


def _cmdline(pid: int) -> tuple[str, ...]:
    data = _read(PROC / str(pid) / "cmdline", MAX_CMDLINE) or b""
    args = data.decode("utf-8", "replace").split("\0")
    if args and args[-1] == "":
        args.pop()
    return tuple(args[:MAX_ARGS])


def _environ(pid: int) -> dict[str, str] | None:
    data = _read(PROC / str(pid) / "environ", MAX_ENVIRON)
    if data is None:
        return None
    env: dict[str, str] = {}
    for item in data.decode("utf-8", "replace").split("\0"):
        name, sep, value = item.partition("=")
        if sep and name:
            env.setdefault(name, value)
    return env


def _link(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _mapped_files(pid: int) -> list[str]:
    data = _read(PROC / str(pid) / "maps", MAX_MAPS)
    if data is None:
        return []
    paths: list[str] = []
    seen: set[str] = set()
    for line in data.decode("utf-8", "replace").splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/") and fields[5] not in seen:
            seen.add(fields[5])
            paths.append(fields[5])
    return paths


def identify_process(pid: int, deadline_s: float = DEFAULT_DEADLINE_S) -> ServerIdentity:
    """The code identity of process ``pid`` and its children."""
    deadline = Deadline(deadline_s)
    notes: list[str] = []
    try:
        owner = os.stat(PROC / str(pid)).st_uid
    except OSError:
        return ServerIdentity(pid=pid, notes=(f"process {pid} is gone",))
    tree = process_tree(pid)
    raw_env = _environ(pid)
    if raw_env is None and owner != os.getuid():
        notes.append(
            f"process {pid} is owned by another user (uid {owner}):"
            " its environment and libraries cannot be read"
        )
    envs: list[tuple[int, dict[str, str]]] = [(pid, raw_env or {})]
    mapped: list[str] = []
    for member in tree:
        if deadline.expired():
            notes.append("deadline reached while reading the process tree")
            break
        if member != pid:
            child_env = _environ(member)
            if child_env is not None:
                envs.append((member, child_env))
        mapped.extend(_mapped_files(member))
    environment, env_notes = merge_environments(envs)
    notes.extend(env_notes)
    exe = _link(PROC / str(pid) / "exe")
    cwd = _link(PROC / str(pid) / "cwd")
    raw_cmdline = _cmdline(pid)
    started = start_time(pid)
    identity = ServerIdentity(
        pid=pid,
        executable=exe,
        cmdline=redact_argv(raw_cmdline, MAX_ARG),
        cwd=cwd,
        started_at=started,
        pids=tuple(tree),
        environment=environment,
        libraries=loaded_libraries(mapped),
    )
    sites = site_dirs(raw_cmdline[0] if raw_cmdline else None, exe, mapped)
    package = python_package(raw_cmdline, cwd, raw_env or {}, sites)
    source_dir: str | None
    if package is not None:
        identity = replace(identity, package=package.name, package_version=package.version)
        source_dir = package.source_dir
    else:
        source_dir = str(Path(exe).parent) if exe and not exe.startswith("/usr/") else None
    if source_dir is not None:
        checkout = read_checkout(source_dir, started, deadline)
        if checkout is not None:
            identity = replace(identity, checkout=checkout)
            identity = replace(
                identity,
                warnings=tuple(
                    f"{change} (the running code may be older than the checkout)"
                    for change in checkout.changed_after_start
                ),
            )
    if deadline.expired():
        notes.append("deadline reached: the identity may be incomplete")
    return scrub_identity(replace(identity, notes=tuple(notes)))


def identify_server(base_url: str, deadline_s: float = DEFAULT_DEADLINE_S) -> ServerIdentity:
    """The code identity of the server at ``base_url`` when it runs on this machine.

    A remote server, a port nobody here listens on (a container with its own network), or a
    process owned by another user gives an identity with a note that says so.
    """
    deadline = Deadline(deadline_s)
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ServerIdentity(notes=(f"cannot read host and port from {base_url!r}",))
    if not is_local_host(host, timeout=min(1.0, deadline.left())):
        return ServerIdentity(notes=(NOTE_REMOTE,))
    sockets = listening_sockets(port)
    if not sockets:
        return ServerIdentity(
            notes=(
                f"process not visible: nothing in this network namespace listens on port {port}"
                " (a container, or a port forward?)",
            )
        )
    owners = socket_owners({inode for inode, _ in sockets}, deadline)
    if not owners:
        uids = sorted({uid for _, uid in sockets if uid != os.getuid()})
        if uids:
            return ServerIdentity(
                notes=(f"the server on port {port} is owned by another user (uid {uids[0]})",)
            )
        return ServerIdentity(
            notes=(f"process not visible: the socket on port {port} has no visible owner",)
        )
    parents = _parents()
    # several processes can share the listening socket (forked API servers): take the topmost
    top = [pid for pid in owners if parents.get(pid) not in owners]
    root = (top or owners)[0]
    return identify_process(root, deadline_s=deadline.left())


# --- the code identity of a watched server, collected off the UI thread -----------------------


def identify(base_url: str, info: ServerInfo | None) -> ServerIdentity:
    """The identity of the server at ``base_url``; blocks up to a few seconds (``/proc``, git).

    A llama-server's build id (its commit) comes from what the server reported about itself
    (``info.version``, read from ``/props``), never from running its binary.
    """
    identity = identify_server(base_url)
    return with_server_build(routed_server(identity, info), info)


def routed_server(identity: ServerIdentity, info: ServerInfo | None) -> ServerIdentity:
    """A llama-server router's identity narrowed to the router and the watched model's own
    server (the one listening on the ``--port`` of the command line the router reports for
    it): the servers of its other models are other work on the host, whose CPU competes with
    the watched one's. As it was for any other server, or when that server is not found among
    the router's children."""
    if identity.pid is None or info is None or not info.routed or not info.launch_args:
        return identity
    port = _port_of(server_argv(info.launch_args))
    if port is None:
        return identity
    owners = socket_owners({inode for inode, _ in listening_sockets(port)}, Deadline(1.0))
    child = next((pid for pid in owners if pid in identity.pids and pid != identity.pid), None)
    if child is None:
        return identity
    return replace(identity, pids=(identity.pid, *process_tree(child)))


def _port_of(argv: Sequence[str]) -> int | None:
    for flag, value in itertools.pairwise(argv):
        if flag == "--port" and value.isdigit() and len(value) <= 5:
            return int(value) if 0 < int(value) < 65536 else None
    return None


def with_server_build(identity: ServerIdentity, info: ServerInfo | None) -> ServerIdentity:
    """Add a native server's build id to the identity of its local process."""
    if identity.pid is None or info is None or info.dialect is not Dialect.LLAMACPP:
        return identity
    return with_build_info(identity, info.version)


def commit_label(identity: ServerIdentity | None) -> str | None:
    """``"0c1e570"``, or ``"0c1e570*"`` when the checkout has uncommitted changes; else ``None``."""
    if identity is None or identity.commit is None:
        return None
    dirty = identity.checkout is not None and identity.checkout.dirty is True
    return identity.commit[:7] + ("*" if dirty else "")


def code_parts(identity: ServerIdentity) -> list[str]:
    """What names the code a found process runs: package, commit or build, NCCL, torch."""
    parts: list[str] = []
    if identity.package:
        parts.append(f"{identity.package} {identity.package_version or ''}".strip())
    if identity.short_commit:
        dirty = identity.checkout is not None and identity.checkout.dirty is True
        parts.append(
            f"commit {identity.short_commit}" + (" (uncommitted changes)" if dirty else "")
        )
    elif identity.build:
        parts.append(f"build {identity.build}")
    for kind, label in (("nccl", "NCCL"), ("torch", "torch")):
        version = identity.library(kind)
        if version:
            parts.append(f"{label} {version}")
    return parts


def code_summary(identity: ServerIdentity | None) -> str:
    """One line naming the code a server runs (package, commit, NCCL, torch), or why not."""
    if identity is None:
        return "not read"
    if identity.pid is None:
        return sanitize_line("not read (" + ("; ".join(identity.notes) or "no process") + ")")
    text = f"{' · '.join(code_parts(identity)) or 'unknown'} (process {identity.pid})"
    text += "".join(f"; warning: {w}" for w in identity.warnings)
    return sanitize_line(text)


__all__ = [
    "NOTE_REMOTE",
    "code_parts",
    "code_summary",
    "commit_label",
    "identify",
    "identify_process",
    "identify_server",
    "is_local_host",
    "listening_sockets",
    "process_tree",
    "routed_server",
    "socket_owners",
    "start_time",
    "with_server_build",
]
