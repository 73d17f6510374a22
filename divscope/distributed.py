"""Data parallelism: which share of a run's work this process does, and how processes meet.

A run is cut into units of work whose layout depends only on the input and the settings (never
on how many processes run it), so a run can be resumed with another number of processes and
its output is the same. Each process takes a deterministic, cost-balanced share of the units
(`World.share`) and writes one part per unit (`divscope.output`).

Two ways to run several processes:
- `torchrun --nproc-per-node N -m divscope <command> ...` (or `srun` through torchrun): the
  processes form a `torch.distributed` group (NCCL on GPUs, gloo on the CPU). They meet only to
  agree on the output directory before the work and to wait for each other after it; no tensor
  is exchanged. Rank 0 then assembles a single-file output and prints the summary. The wait
  after the work has no time limit (`World.wait`: a rank may finish hours before the last);
  the group's collectives (rank 0 preparing or assembling the output while the others wait)
  time out after `group_timeout`, 2 hours unless `DIVSCOPE_GROUP_TIMEOUT` says otherwise,
  where NCCL's own default is 10 minutes.
- `--shard i/n` (0 <= i < n): independent processes (a SLURM array) that never talk; each does
  share i of n. The output is then a directory, complete when every shard is done.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from divscope.errors import DivscopeError

T = TypeVar("T")

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
"""The environment torchrun gives each process it starts."""
GROUP_TIMEOUT_VARIABLE = "DIVSCOPE_GROUP_TIMEOUT"
"""Seconds a collective of the torchrun group may wait (`group_timeout`)."""
GROUP_TIMEOUT = 7200.0
"""`group_timeout`'s default: 2 hours. Rank 0 prepares the output (verifying a resumed run's
parts) and assembles a single-file output (rewriting every part) while the others wait in a
collective: minutes for a large table, where NCCL's default of 10 minutes would end the run."""
WAIT_POLL = 1.0
"""Seconds between two looks at the count of ranks done (`World.wait`)."""
_WAITS = itertools.count()  # every rank calls `World.wait` equally often: the n-th wait's key


@dataclass(frozen=True)
class World:
    """This process's place among the processes of one run.

    >>> World.shard("1/4").rank, World.shard("1/4").size
    (1, 4)
    >>> World().share([5, 1, 1, 1])
    [0, 1, 2, 3]
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    """Rank among the processes of this node (torchrun), which picks this process's GPU."""
    local_size: int = 1
    """Processes on this node (torchrun)."""
    group: bool = False
    """The processes form a `torch.distributed` group (torchrun); False: they never talk."""

    @staticmethod
    def shard(text: str) -> World:
        """The world of `--shard i/n`.

        Raises:
            DivscopeError: not `i/n` with 0 <= i < n.
        """
        try:
            rank, size = (int(part) for part in text.split("/"))
        except ValueError:
            rank = size = -1
        if not 0 <= rank < size:
            raise DivscopeError(
                f"--shard {text!r}: give i/n with 0 <= i < n, e.g. --shard 0/4 ... --shard 3/4 "
                "(in a SLURM array: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with "
                "--array=0-3)."
            )
        return World(rank=rank, size=size)

    @property
    def main(self) -> bool:
        """Rank 0: it prepares the output, assembles it and reports."""
        return self.rank == 0

    def share(self, costs: Sequence[float]) -> list[int]:
        """The units (indices into `costs`) that this rank does, in increasing order.

        Longest processing time first: units by decreasing cost (ties: lower index first) each
        go to the rank with the least work so far (ties: lower rank). Deterministic, every unit
        to exactly one rank, and no rank more than one unit's cost above another.
        """
        loads = [(0.0, rank) for rank in range(self.size)]  # a heap of (work so far, rank)
        mine = []
        for unit in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
            load, rank = heapq.heappop(loads)
            if rank == self.rank:
                mine.append(unit)
            heapq.heappush(loads, (load + costs[unit], rank))
        return sorted(mine)

    def device(self, device: str | None) -> str | None:
        """The device this rank puts a model on: with several processes on a node, `auto` and
        `cuda` mean the rank's own GPU (`cuda:LOCAL_RANK`), and `cuda:N` means the N-th GPU of
        the rank's own slice of the node's GPUs (GPUs / processes per node each)."""
        if device is None or self.local_size == 1 or device == "cpu":
            return device
        import torch

        count = torch.cuda.device_count()
        if not count:
            return device  # `auto` resolves to the CPU
        per_rank = count // self.local_size
        if per_rank < 1:
            raise DivscopeError(
                f"{self.local_size} processes on this node but {count} GPU(s): start at most "
                f"{count} (torchrun --nproc-per-node {count})."
            )
        index = 0 if device in ("auto", "cuda") else int(device.removeprefix("cuda:"))
        if index >= per_rank:
            raise DivscopeError(
                f"device {device!r}: each of the {self.local_size} processes on this node has "
                f"{per_rank} GPU(s) of its own (cuda:0..cuda:{per_rank - 1} of its slice); use "
                "fewer processes per node or lower indices."
            )
        return f"cuda:{self.local_rank * per_rank + index}"

    def on_main(self, work: Callable[[], T]) -> T:
        """Run `work` on rank 0 and give every rank its result; an error raised there is raised
        on every rank (no rank is left waiting)."""
        if not self.group:
            return work()
        import torch.distributed as dist

        box: list[Any] = [None]
        if self.main:
            try:
                box[0] = ("ok", work())
            except DivscopeError as error:
                box[0] = ("error", str(error))
        dist.broadcast_object_list(box, src=0)
        status, value = box[0]
        if status == "error":
            raise DivscopeError(value)
        return value

    def wait(self) -> None:
        """Wait until every rank gets here (torchrun), however long that takes; independent
        shards do not wait.

        Not a barrier (a collective times out, NCCL's after 10 minutes by default, and one
        unit of a 32B pair takes about 15): each rank adds itself to a counter in the group's
        key-value store (torchrun's), then reads it every `WAIT_POLL` seconds until all have.
        A rank that fails never arrives, but torchrun then stops the others.
        """
        if not self.group:
            return
        import torch.distributed as dist

        store = dist.distributed_c10d._get_default_store()  # the group's own; no public getter
        key = f"divscope/wait/{next(_WAITS)}"
        store.add(key, 1)
        while store.add(key, 0) < self.size:
            time.sleep(WAIT_POLL)


def group_timeout() -> float:
    """Seconds a collective of the torchrun group may wait: `DIVSCOPE_GROUP_TIMEOUT` when set,
    else `GROUP_TIMEOUT` (2 hours).

    Raises:
        DivscopeError: a value that is not a positive number of seconds.
    """
    text = os.environ.get(GROUP_TIMEOUT_VARIABLE)
    if text is None:
        return GROUP_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise DivscopeError(
            f"{GROUP_TIMEOUT_VARIABLE}={text!r}: give the seconds a collective of the torchrun "
            f"group may wait, a positive number (e.g. {GROUP_TIMEOUT_VARIABLE}=14400 for 4 "
            "hours), or unset it for 2 hours."
        )
    return seconds


def reports() -> bool:
    """Whether this process prints a run's closing report: rank 0 under torchrun (the others
    would repeat it), every process otherwise."""
    return os.environ.get("RANK", "0") == "0"


def current_world(
    shard: str | None = None, device: str = "auto", device_map: str | None = None
) -> World:
    """The world of this process: torchrun's group when started by torchrun (joined here, with
    NCCL when `device` puts the models on GPUs, else gloo, its collectives waiting up to
    `group_timeout`), `--shard i/n`, or one process.

    Raises:
        DivscopeError: `--shard` under torchrun, `--device-map` with several torchrun
            processes on a node (each would spread its models over every GPU of the node), or a
            bad `DIVSCOPE_GROUP_TIMEOUT`.
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World.shard(shard) if shard is not None else World()
    if shard is not None:
        raise DivscopeError(
            f"--shard {shard} under torchrun ({size} processes): torchrun already splits the "
            "work; use one or the other."
        )
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if device_map is not None and local_size > 1:
        raise DivscopeError(
            f"--device-map {device_map} with {local_size} torchrun processes on a node: each "
            "would spread its models over every GPU of the node; start one process per node "
            "(--nproc-per-node 1), or give each process its GPUs with --base-device/--rl-device."
        )
    import torch
    import torch.distributed as dist

    world = World(
        rank=int(os.environ["RANK"]),
        size=size,
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        local_size=local_size,
        group=True,
    )
    if not dist.is_initialized():
        gpu = device != "cpu" and torch.cuda.is_available()
        if gpu:
            torch.cuda.set_device(world.device("cuda"))
        dist.init_process_group(
            backend="nccl" if gpu else "gloo", timeout=timedelta(seconds=group_timeout())
        )
        atexit.register(dist.destroy_process_group)  # leave the group cleanly at exit
    return world
