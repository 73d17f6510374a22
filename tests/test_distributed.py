"""`divscope.distributed`: shares of the work, `--shard`, and torchrun's world."""

import numpy as np
import pytest

from divscope.distributed import World, current_world
from divscope.errors import DivscopeError


@pytest.mark.parametrize("size", range(1, 8))
@pytest.mark.parametrize("seed", range(3))
def test_the_shares_cover_every_unit_exactly_once_and_balance_the_cost(size, seed):
    rng = np.random.default_rng(seed)
    costs = rng.integers(1, 1000, size=int(rng.integers(0, 40))).tolist()  # uneven, maybe none
    shares = [World(rank=r, size=size).share(costs) for r in range(size)]
    units = sorted(u for share in shares for u in share)
    assert units == list(range(len(costs)))
    for share in shares:
        assert share == sorted(share)
    loads = [sum(costs[u] for u in share) for share in shares]
    assert max(loads) - min(loads) <= max(costs, default=0)
    # Deterministic: the same input gives the same shares.
    assert shares == [World(rank=r, size=size).share(costs) for r in range(size)]


def test_fewer_units_than_ranks_leaves_some_ranks_idle():
    assert [World(rank=r, size=3).share([5, 7]) for r in range(3)] == [[1], [0], []]


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "1/0", "0/2/3"])
def test_a_bad_shard_is_a_clear_error(text):
    with pytest.raises(DivscopeError, match=r"--shard .*give i/n with 0 <= i < n"):
        World.shard(text)


def test_the_world_of_one_process_or_a_shard(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert current_world() == World()
    assert current_world("2/3") == World(rank=2, size=3)
    assert not current_world("2/3").main and current_world("0/3").main


def test_shard_under_torchrun_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DivscopeError, match="torchrun already splits the work"):
        current_world("0/2")


def test_a_device_map_with_several_processes_per_node_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(DivscopeError, match="each would spread its models over every GPU"):
        current_world(device_map="auto")


def test_a_lone_process_keeps_its_device():
    world = World(rank=1, size=4)  # --shard: one process per node
    assert world.device("cuda:1") == "cuda:1" and world.device("cpu") == "cpu"


def test_on_main_without_a_group_just_runs():
    assert World().on_main(lambda: 42) == 42
    with pytest.raises(DivscopeError, match="boom"):
        World().on_main(lambda: (_ for _ in ()).throw(DivscopeError("boom")))


@pytest.mark.parametrize("size", range(1, 8))
def test_the_shares_of_a_scoring_run_cover_every_trajectory_once(size):
    from divscope.scoring.score import score_units

    rng = np.random.default_rng(size)
    lengths = rng.integers(2, 3000, size=101).tolist()  # uneven: 2 to 3,000 tokens
    tokens = [max(1, n // 2) for n in lengths]
    units = score_units(lengths, tokens, part_tokens=4096)
    assert len(units) >= 16
    costs = [sum(tokens[i] for i in unit) for unit in units]
    rows = [i for r in range(size) for u in World(rank=r, size=size).share(costs) for i in units[u]]
    assert sorted(rows) == list(range(101))
    assert all(c <= 4096 or len(u) == 1 for u, c in zip(units, costs, strict=True))


def test_the_group_timeout_is_the_variables_else_two_hours(monkeypatch):
    from divscope.distributed import group_timeout

    monkeypatch.delenv("DIVSCOPE_GROUP_TIMEOUT", raising=False)
    assert group_timeout() == 7200
    monkeypatch.setenv("DIVSCOPE_GROUP_TIMEOUT", "14400")
    assert group_timeout() == 14400
    for bad in ("0", "-5", "two hours", "inf", "nan"):
        monkeypatch.setenv("DIVSCOPE_GROUP_TIMEOUT", bad)
        with pytest.raises(DivscopeError, match=f"DIVSCOPE_GROUP_TIMEOUT='{bad}': give the sec"):
            group_timeout()


def _rank(rank: int, port: int, results) -> None:
    """One torchrun-like process of two (gloo): the wait outlasts the group's timeout of 0.5 s,
    `on_main` still works after it, then a plain barrier that waits as long times out. Its
    outcome, or the error it stopped on, goes to `results`."""
    try:
        results.put((rank, _ranks_work(rank, port)))
    except Exception as error:  # the test names it, instead of waiting for a lost rank
        results.put((rank, {"error": repr(error)}))


def _ranks_work(rank: int, port: int) -> dict:
    import os
    import time

    import torch.distributed as dist

    from divscope import distributed

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      DIVSCOPE_GROUP_TIMEOUT="0.5")  # fmt: skip
    distributed.WAIT_POLL = 0.05
    world = current_world(device="cpu")
    outcome = {"world": (world.rank, world.size, world.group)}
    if rank == 1:
        time.sleep(1.2)  # still decoding
    start = time.perf_counter()
    world.wait()
    outcome["waited"] = time.perf_counter() - start
    outcome["main"] = world.on_main(lambda: f"assembled by {world.rank}")
    if rank == 1:
        time.sleep(1.2)
    try:
        dist.barrier()
        outcome["barrier"] = "passed"
    except RuntimeError as error:
        outcome["barrier"] = f"failed: {error}"
    return outcome


def test_torchrun_ranks_wait_for_each_other_beyond_the_group_timeout():
    """Two gloo processes: rank 0 waits 1.2 s for rank 1 (more than the group's 0.5 s
    timeout, which a barrier does not survive), and the group still works afterwards."""
    import multiprocessing
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    ranks = [context.Process(target=_rank, args=(r, port, results)) for r in range(2)]
    for process in ranks:
        process.start()
    outcomes = dict(results.get(timeout=60) for _ in ranks)
    for process in ranks:
        process.join(timeout=30)
    assert "error" not in outcomes[0] and "error" not in outcomes[1], outcomes
    assert outcomes[0]["world"] == (0, 2, True) and outcomes[1]["world"] == (1, 2, True)
    assert outcomes[0]["waited"] > 1.0 > outcomes[1]["waited"]
    assert outcomes[0]["main"] == outcomes[1]["main"] == "assembled by 0"
    assert outcomes[0]["barrier"].startswith("failed")  # the timeout is the variable's
