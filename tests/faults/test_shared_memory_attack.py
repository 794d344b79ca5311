"""Another local user cannot plant, take or redirect the lock of a shared curriculum.

The attacker runs as `nobody` (setpriv, so the test needs root) and watches /dev/shm with
inotify: for every new curriculum block it plants the `<name>.lock` file earlier versions
used and holds an flock on it, and tries to open and flock the block itself. Meanwhile the
victim creates curricula and records into them with a short lock timeout. The attacker also
plants blocks of its own (a forged tracker, a symlink to it, a name the victim will ask for).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from fault_budget import scaled
from shm_faults import lp_config

from curriculum import Curriculum, LockTimeoutError, SharedTrackerError
from curriculum.memory import SEGMENT_DIR, SEGMENT_PREFIX, SharedMemoryBackend, remove_orphaned_segments

ATTACKER_USER = ("--reuid=nobody", "--regid=nogroup", "--clear-groups")

WATCHER = textwrap.dedent("""
    import ctypes, errno, fcntl, json, os, select, struct, sys
    directory, prefix = sys.argv[1], sys.argv[2]
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    inotify = libc.inotify_init1(os.O_NONBLOCK)
    libc.inotify_add_watch(inotify, directory.encode(), 0x100)  # IN_CREATE
    report = {"blocks_seen": 0, "blocks_opened": 0, "blocks_locked": 0, "lock_files_planted": 0,
              "lock_files_held": 0, "refusals": {}}
    held = []
    print("watching", flush=True)

    def refused(what, exc):
        key = what + ":" + errno.errorcode.get(exc.errno, str(exc.errno))
        report["refusals"][key] = report["refusals"].get(key, 0) + 1

    def attack(name):
        report["blocks_seen"] += 1
        path = os.path.join(directory, name)
        try:  # the lock file of earlier versions, planted before its owner makes it
            fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(fd, 0o666)
            report["lock_files_planted"] += 1
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            report["lock_files_held"] += 1
            held.append(fd)
        except OSError as exc:
            refused("plant_lock_file", exc)
        try:  # the block itself
            fd = os.open(path, os.O_RDWR)
            report["blocks_opened"] += 1
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            report["blocks_locked"] += 1
            held.append(fd)
        except OSError as exc:
            refused("open_block", exc)

    while True:
        ready, _, _ = select.select([inotify, sys.stdin], [], [])
        if sys.stdin in ready:  # the victim closed our stdin: report and stop
            break
        data = os.read(inotify, 65536)
        at = 0
        while at < len(data):
            wd, mask, cookie, length = struct.unpack_from("iIII", data, at)
            name = data[at + 16:at + 16 + length].rstrip(b"\\0").decode()
            at += 16 + length
            if name.startswith(prefix) and not name.endswith(".lock") and "planted" not in name:
                attack(name)
    print(json.dumps(report), flush=True)
""")

PLANTER = textwrap.dedent("""
    import json, os, sys
    directory, forged, link, taken, header = sys.argv[1:6]
    for name in (forged, taken):
        fd = os.open(os.path.join(directory, name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, 0o666)
        os.write(fd, bytes.fromhex(header))
        os.close(fd)
    os.symlink(os.path.join(directory, forged), os.path.join(directory, link))
""")


def _as_nobody(*args: str) -> list[str]:
    return ["setpriv", *ATTACKER_USER, sys.executable, "-I", "-S", *args]


@pytest.fixture
def attacker_available() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the attacker runs as user nobody via setpriv, and only root can switch to it")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to run the attacker as user nobody")


def _forged_header() -> str:
    """The first bytes of a real tracker block (what a forger copies from the format)."""
    backend = SharedMemoryBackend({"x": ("int64", 1)})
    try:
        with open(os.path.join(SEGMENT_DIR, backend.name), "rb") as block:
            return block.read(4096).hex()
    finally:
        backend.close()


def test_a_local_attacker_cannot_plant_take_or_redirect_the_lock(attacker_available, fault_figure) -> None:
    curricula = scaled(300, minimum=30)
    tag = f"{os.getpid()}_{time.monotonic_ns()}"
    planted = {"forged": f"{SEGMENT_PREFIX}planted_forged_{tag}", "link": f"{SEGMENT_PREFIX}planted_link_{tag}",
               "taken": f"{SEGMENT_PREFIX}planted_taken_{tag}"}
    subprocess.run(_as_nobody("-c", PLANTER, SEGMENT_DIR, planted["forged"], planted["link"], planted["taken"],
                              _forged_header()), check=True, timeout=60)
    watcher = subprocess.Popen(_as_nobody("-c", WATCHER, SEGMENT_DIR, SEGMENT_PREFIX), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    names: list[str] = []
    timeouts = 0
    try:
        assert watcher.stdout.readline().strip() == "watching"
        for _ in range(curricula):
            with Curriculum(lp_config(n=8), shared_memory=True, lock_timeout=0.3) as curriculum:
                names.append(curriculum.shared_memory_name)
                time.sleep(0.005)  # the attacker's turn
                for _ in range(20):
                    try:
                        curriculum.update_task_performance(curriculum.get_task().task_id, 0.5)
                    except LockTimeoutError:
                        timeouts += 1

        for name in (planted["forged"], planted["link"]):  # a victim told to attach to the attacker's blocks
            with pytest.raises(SharedTrackerError):
                Curriculum.attach(name, lp_config(n=8))
        forged_path = os.path.join(SEGMENT_DIR, planted["forged"])
        with pytest.raises(SharedTrackerError, match=(
                f"^Expected the shared memory block '{forged_path}' to belong to uid 0 \\(this process\\), "
                "received one owned by uid 65534: refusing to use it$")):
            SharedMemoryBackend.attach(planted["forged"])
        link_path = os.path.join(SEGMENT_DIR, planted["link"])
        with pytest.raises(SharedTrackerError, match=(
                f"^Expected '{link_path}' to be a shared memory block, received a symbolic link: refusing to follow "
                "it$")):
            SharedMemoryBackend.attach(planted["link"])
        taken_path = os.path.join(SEGMENT_DIR, planted["taken"])
        with pytest.raises(SharedTrackerError, match=(
                f"^Expected no shared memory block named '{planted['taken']}', but '{taken_path}' already exists$")):
            SharedMemoryBackend({"x": ("int64", 1)}, name=planted["taken"])
        removed = remove_orphaned_segments()
        assert not set(removed) & {os.path.join(SEGMENT_DIR, n) for n in planted.values()}  # not ours to remove
    finally:
        out, _ = watcher.communicate(timeout=60)  # closes its stdin: it reports and stops
        for name in [*planted.values(), *(f"{n}.lock" for n in names)]:
            try:
                os.unlink(os.path.join(SEGMENT_DIR, name))
            except FileNotFoundError:
                pass
    report = json.loads(out.strip().splitlines()[-1])
    fault_figure("planted_lock.curricula", len(names),
                 f"curricula created and written (20 updates each, lock timeout 0.3 s) while user nobody watched "
                 f"/dev/shm with inotify; it saw {report['blocks_seen']}")
    fault_figure("planted_lock.lock_files_planted", report["lock_files_planted"],
                 "`<name>.lock` files the attacker planted and held (nothing opens them any more)")
    fault_figure("planted_lock.blocks_opened_by_attacker", report["blocks_opened"],
                 f"curriculum blocks the attacker could open (refusals: {report['refusals']})")
    fault_figure("planted_lock.lock_timeouts", timeouts, "updates of the victim that timed out on the lock")
    assert report["blocks_seen"] > 0, "the attacker saw no curriculum: the test tested nothing"
    assert report["blocks_opened"] == 0 and report["blocks_locked"] == 0, report
    assert timeouts == 0, f"{timeouts} updates timed out on a lock the attacker held"
