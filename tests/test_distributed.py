"""torchlean.distributed on the CPU backend: the store, collectives in 2 and 4 processes against
NumPy, groups, point to point, and timeouts that name the ranks that did not arrive."""

import multiprocessing as mp
import os
import socket
import time
import traceback
from datetime import timedelta

import numpy as np
import pytest

import torchlean as tl
import torchlean.distributed as dist
from torchlean.errors import DistributedError, ShapeError


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(fn, rank, world, port, q, timeout, backend="gloo"):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      NCCL_NVLS_ENABLE="0")
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
        if backend == "nccl":
            tl.cuda.set_device(rank)     # after init_process_group, as torch programs do
        out = fn(rank, world)
        dist.destroy_process_group()
        q.put((rank, "ok", out))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run(fn, world, timeout=20.0, backend="gloo"):
    """``fn(rank, world)`` in ``world`` processes of one job; returns the results by rank (raises on error)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    ps = [ctx.Process(target=_worker, args=(fn, r, world, port, q, timeout, backend)) for r in range(world)]
    for p in ps:
        p.start()
    res = {}
    try:
        for _ in range(world):
            rank, status, out = q.get(timeout=timeout + 60)
            res[rank] = (status, out)
    finally:
        for p in ps:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [res[r] for r in range(world)]


def values(results):
    for status, out in results:
        if status != "ok":
            raise AssertionError(out)
    return [out for _, out in results]


def _data(rank, shape=(3, 5), dtype=np.float32):
    return (np.random.default_rng(100 + rank).standard_normal(shape) * 10 ** (rank - 1)).astype(dtype)


# ---- the workers (module level: spawned processes import them) -----------------------------------

def _all_reduce(rank, world):
    out = {}
    for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
        for dt in (np.float32, np.float64, np.int64):
            if op == "AVG" and dt == np.int64:
                continue
            t = tl.tensor(_data(rank, dtype=dt) if dt != np.int64 else np.arange(15).reshape(3, 5) * (rank + 1))
            w = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=(op == "MAX"))
            if w is not None:
                assert w.wait() and w.is_completed()
            out[(op, np.dtype(dt).name)] = t.numpy().copy()
    big = tl.tensor(np.full(300_000, float(rank + 1), np.float32))   # past the first segment size
    dist.all_reduce(big)
    out["big"] = float(big.numpy()[[0, -1]].sum())
    return out


def _movement(rank, world):
    x = tl.tensor(_data(rank))
    b = tl.tensor(_data(rank))
    dist.broadcast(b, src=world - 1)
    parts = [tl.zeros(3, 5) for _ in range(world)]
    dist.all_gather(parts, x)
    into = tl.zeros(3 * world, 5)
    dist.all_gather_into_tensor(into, x)
    rs_in = tl.tensor(np.arange(world * 4, dtype=np.float64) * (rank + 1))
    rs_out = tl.zeros(4, dtype=tl.float64)
    dist.reduce_scatter_tensor(rs_out, rs_in)
    rsl_out = tl.zeros(2)
    dist.reduce_scatter(rsl_out, [tl.tensor([float(rank), float(j)]) for j in range(world)], op=dist.ReduceOp.MAX)
    dist.barrier()
    red = tl.tensor([float(rank + 1), -float(rank)])
    dist.reduce(red, dst=1, op=dist.ReduceOp.MAX)
    gl = [tl.zeros(3, 5) for _ in range(world)] if rank == 0 else None
    dist.gather(x, gl, dst=0)
    sc = tl.zeros(2)
    dist.scatter(sc, [tl.tensor([float(j), 10.0 * j]) for j in range(world)] if rank == world - 1 else None,
                 src=world - 1)
    extra = (red.numpy(), None if gl is None else [p.numpy() for p in gl], sc.numpy())
    return (b.numpy(), [p.numpy() for p in parts], into.numpy(), rs_out.numpy(), rsl_out.numpy(),
            dist.get_rank(), dist.get_world_size(), dist.get_backend(), extra)


def _p2p_and_groups(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = []
    for k in range(3):   # a ring, three messages each way in order
        dist.send(tl.tensor([float(rank), float(k)]), nxt)
        t = tl.zeros(2)
        dist.recv(t, prv)
        got.append(t.tolist())
    even = dist.new_group([r for r in range(world) if r % 2 == 0])
    odd = dist.new_group([r for r in range(world) if r % 2 == 1])
    mine = even if rank % 2 == 0 else odd
    other = odd if rank % 2 == 0 else even
    t = tl.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    info = (dist.get_rank(mine), dist.get_world_size(mine), dist.get_rank(other), other is dist.GroupMember.NON_GROUP_MEMBER,
            dist.get_process_group_ranks(mine))
    return got, t.item(), info


def _sampler(rank, world):
    from torchlean.utils.data import DistributedSampler
    os.environ.pop("WORLD_SIZE")   # read from the process group, not the environment
    return list(DistributedSampler(range(10), shuffle=False))


def _late(rank, world):
    t = tl.ones(3)
    if rank == world - 1:
        time.sleep(3.0)              # hangs past the others' timeout, never reaching the collective
        return "skipped"
    try:
        dist.all_reduce(t)
    except DistributedError as e:
        return str(e)
    return "no error"


_GLOBAL_BATCH = 24


def _mlp_data():
    rng = np.random.default_rng(11)
    return rng.standard_normal((_GLOBAL_BATCH, 20)).astype(np.float32), rng.integers(0, 5, _GLOBAL_BATCH)


def _mlp_steps(model, opt, batches):
    F = tl.nn.functional
    for chunks in batches:           # each step: one or more micro-batches (x, y) accumulated
        opt.zero_grad()
        for x, y in chunks:
            (F.cross_entropy(model(tl.tensor(x)), tl.tensor(y)) / len(chunks)).backward()
        opt.step()


def _ddp_train(rank, world):
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    tl.manual_seed(rank)                       # different weights per rank: the wrap broadcasts rank 0's
    model = DDP(MLP(20, [32, 32], 5), bucket_cap_mb=0.001)    # several buckets
    opt = tl.optim.Adam(model.parameters(), lr=0.01)
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    xs, ys = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
    _mlp_steps(model, opt, [[(xs, ys)]] * 4)
    h = n // 2                                  # gradient accumulation: the first half under no_sync
    opt.zero_grad()
    F = tl.nn.functional
    with model.no_sync():
        (F.cross_entropy(model(tl.tensor(xs[:h])), tl.tensor(ys[:h])) / 2).backward()
    (F.cross_entropy(model(tl.tensor(xs[h:])), tl.tensor(ys[h:])) / 2).backward()
    opt.step()
    params = {k: v.numpy().copy() for k, v in model.module.state_dict().items()}
    # a parameter the forward does not use
    extra = tl.nn.Linear(3, 3)
    holder = tl.nn.ModuleDict({"used": tl.nn.Linear(3, 1), "unused": extra})
    DDP(holder)                                 # its hooks live on in the parameters
    try:
        holder["used"](tl.ones(2, 3)).sum().backward()
        unused = "no error"
    except DistributedError as e:
        unused = str(e)
    extra = tl.nn.Linear(3, 3)
    holder = tl.nn.ModuleDict({"used": tl.nn.Linear(3, 1), "unused": extra})
    lenient = DDP(holder, find_unused_parameters=True)
    lenient.module["used"](tl.ones(2, 3)).sum().backward()
    return params, unused, extra.weight.grad.tolist()


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_training_equals_single_process_training_on_the_full_batch(world):
    from torchlean.models.mlp import MLP
    res = values(run(_ddp_train, world, timeout=60))
    tl.manual_seed(0)
    model = MLP(20, [32, 32], 5)
    opt = tl.optim.Adam(model.parameters(), lr=0.01)
    x, y = _mlp_data()
    h = (_GLOBAL_BATCH // world) // 2
    halves = [(np.concatenate([x[r * 2 * h + k * h:r * 2 * h + (k + 1) * h] for r in range(world)]),
               np.concatenate([y[r * 2 * h + k * h:r * 2 * h + (k + 1) * h] for r in range(world)])) for k in (0, 1)]
    _mlp_steps(model, opt, [[(x, y)]] * 4 + [halves])
    want = {k: v.numpy() for k, v in model.state_dict().items()}
    for r, (params, unused, extra_grad) in enumerate(res):
        for k, v in want.items():
            np.testing.assert_allclose(params[k], v, rtol=2e-5, atol=2e-6, err_msg=f"{k} on rank {r}")
            np.testing.assert_array_equal(params[k], res[0][0][k])       # every rank the same bits
        assert "did not receive a gradient in this backward: unused.weight, unused.bias" in unused
        assert extra_grad == [[0.0] * 3] * 3


def _objects_and_async_p2p(rank, world):
    out = {}
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "items": list(range(rank)), "name": f"r{rank}"})
    out["all_gather"] = objs
    lst = [{"config": 7, "from": rank}, "text"] if rank == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    out["broadcast"] = lst
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(("g", rank * rank), gathered, dst=0)
    out["gather"] = gathered
    got = [None]
    dist.scatter_object_list(got, [f"for {r}" for r in range(world)] if rank == 0 else None, src=0)
    out["scatter"] = got[0]
    # a ring: post the receive first, then send, then wait (blocking receives would deadlock here)
    buf = tl.zeros(3)
    req = dist.irecv(buf, src=(rank - 1) % world)
    dist.isend(tl.full((3,), float(rank)), dst=(rank + 1) % world).wait()
    req.wait()
    out["ring"] = buf.tolist()
    a, b = tl.zeros(2), tl.zeros(2)
    works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, a, (rank - 1) % world),
                                    dist.P2POp(dist.isend, tl.full((2,), rank + 0.5), (rank + 1) % world),
                                    dist.P2POp(dist.irecv, b, (rank + 1) % world),
                                    dist.P2POp(dist.isend, tl.full((2,), rank - 0.5), (rank - 1) % world)])
    for w in works:
        w.wait()
    out["batch"] = (a.tolist(), b.tolist())
    return out


def test_object_collectives_and_non_blocking_point_to_point():
    world = 3
    res = values(run(_objects_and_async_p2p, world, timeout=60))
    everyone = [{"rank": r, "items": list(range(r)), "name": f"r{r}"} for r in range(world)]
    for r, out in enumerate(res):
        assert out["all_gather"] == everyone
        assert out["broadcast"] == [{"config": 7, "from": 1}, "text"]
        assert out["gather"] == ([("g", k * k) for k in range(world)] if r == 0 else None)
        assert out["scatter"] == f"for {r}"
        assert out["ring"] == [float((r - 1) % world)] * 3
        assert out["batch"] == ([(r - 1) % world + 0.5] * 2, [(r + 1) % world - 0.5] * 2)


def _ddp_hooked(rank, world):
    """DDP with torch's default communication hooks and a custom one."""
    from torchlean.distributed.algorithms.ddp_comm_hooks import default_hooks as H
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    xs, ys = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
    out = {}
    for name, hook in (("allreduce", H.allreduce_hook), ("fp16", H.fp16_compress_hook),
                       ("bf16", H.bf16_compress_hook), ("fp16_wrapped", H.fp16_compress_wrapper(H.allreduce_hook))):
        tl.manual_seed(0)
        model = DDP(MLP(20, [32, 32], 5), bucket_cap_mb=0.001)
        model.register_comm_hook(None, hook)
        opt = tl.optim.Adam(model.parameters(), lr=0.01)
        _mlp_steps(model, opt, [[(xs, ys)]] * 3)
        out[name] = {k: v.numpy().copy() for k, v in model.module.state_dict().items()}
    seen = []

    def summing(state, bucket):                  # no division: the gradients come back world x the mean
        seen.append((bucket.index(), bucket.is_last(), len(bucket.gradients()), state))
        t = bucket.buffer().clone()
        return dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0])
    tl.manual_seed(0)
    model = DDP(MLP(20, [32, 32], 5), bucket_cap_mb=0.001)
    model.register_comm_hook("st", summing)
    F = tl.nn.functional
    F.cross_entropy(model(tl.tensor(xs)), tl.tensor(ys)).backward()
    out["summed_grad"] = next(model.module.parameters()).grad.numpy().copy()
    out["seen"] = seen
    try:
        model.register_comm_hook(None, summing)
        out["twice"] = "no error"
    except DistributedError as e:
        out["twice"] = str(e)
    return out


def test_ddp_communication_hooks():
    from torchlean.models.mlp import MLP
    world = 2
    res = values(run(_ddp_hooked, world, timeout=90))
    tl.manual_seed(0)
    model = MLP(20, [32, 32], 5)
    opt = tl.optim.Adam(model.parameters(), lr=0.01)
    x, y = _mlp_data()
    _mlp_steps(model, opt, [[(x, y)]] * 3)
    want = {k: v.numpy() for k, v in model.state_dict().items()}
    tl.manual_seed(0)
    ref = MLP(20, [32, 32], 5)
    tl.nn.functional.cross_entropy(ref(tl.tensor(x)), tl.tensor(y)).backward()
    full_grad = next(ref.parameters()).grad.numpy()
    for r, out in enumerate(res):
        for k, v in want.items():
            np.testing.assert_allclose(out["allreduce"][k], v, rtol=2e-5, atol=2e-6, err_msg=f"{k} rank {r}")
            for low, tol in (("fp16", 2e-3), ("fp16_wrapped", 2e-3), ("bf16", 2e-2)):
                np.testing.assert_allclose(out[low][k], v, rtol=tol, atol=tol, err_msg=f"{low} {k} rank {r}")
        np.testing.assert_allclose(out["summed_grad"], full_grad * world, rtol=1e-5, atol=1e-6)
        assert out["seen"] and out["seen"][-1][1] and all(s[3] == "st" for s in out["seen"])
        assert sorted(i for i, *_ in out["seen"]) == list(range(len(out["seen"])))
        assert "register_comm_hook can only be called once" in out["twice"]
        for name in ("allreduce", "fp16", "bf16", "fp16_wrapped"):     # every rank the same bits
            for k in want:
                np.testing.assert_array_equal(out[name][k], res[0][name][k])


def _sync_bn_data():
    rng = np.random.default_rng(21)
    return (rng.standard_normal((8, 3, 5)).astype(np.float32) * 2 + 1,
            rng.standard_normal((8, 3, 5)).astype(np.float32))


def _sync_bn(rank, world):
    """SyncBatchNorm on this rank's share of a fixed global batch: output, input gradient, the weight and
    bias gradients all-reduced (as DDP would), running statistics after two steps."""
    x_all, g_all = _sync_bn_data()
    n = len(x_all) // world
    bn = tl.nn.SyncBatchNorm(3, momentum=None)
    with tl.no_grad():
        bn.weight.copy_(tl.tensor([0.5, 2.0, -1.0]))
        bn.bias.copy_(tl.tensor([0.1, 0.0, -0.3]))
    x = tl.tensor(x_all[rank * n:(rank + 1) * n], requires_grad=True)
    y = bn(x)
    (y * tl.tensor(g_all[rank * n:(rank + 1) * n])).sum().backward()
    for p in (bn.weight.grad, bn.bias.grad):
        dist.all_reduce(p)
    bn(tl.tensor(x_all[rank * n:(rank + 1) * n] * 0.5))
    return (y.detach().numpy(), x.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy(),
            bn.running_mean.numpy(), bn.running_var.numpy(), int(bn.num_batches_tracked.item()))


@pytest.mark.parametrize("world", [2, 4])
def test_sync_batch_norm_equals_batch_norm_on_the_full_batch(world):
    res = values(run(_sync_bn, world, timeout=60))
    x_all, g_all = _sync_bn_data()
    bn = tl.nn.BatchNorm1d(3, momentum=None)
    with tl.no_grad():
        bn.weight.copy_(tl.tensor([0.5, 2.0, -1.0]))
        bn.bias.copy_(tl.tensor([0.1, 0.0, -0.3]))
    x = tl.tensor(x_all, requires_grad=True)
    y = bn(x)
    (y * tl.tensor(g_all)).sum().backward()
    bn(tl.tensor(x_all * 0.5))
    n = len(x_all) // world
    for r, (yr, gr, gw, gb, rm, rv, nbt) in enumerate(res):
        np.testing.assert_allclose(yr, y.detach().numpy()[r * n:(r + 1) * n], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gr, x.grad.numpy()[r * n:(r + 1) * n], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gw, bn.weight.grad.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gb, bn.bias.grad.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rm, bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv, bn.running_var.numpy(), rtol=1e-5, atol=1e-6)
        assert nbt == 2


def _sync_bn_net(nn):
    tl.manual_seed(5) if nn is tl.nn else None
    return nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def _ddp_sync_bn(rank, world):
    """DDP over a model converted to SyncBatchNorm: its statistics' all-reduces and DDP's gradient
    buckets share the backward, in the same order on every rank."""
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    model = DDP(tl.nn.SyncBatchNorm.convert_sync_batchnorm(_sync_bn_net(tl.nn)), bucket_cap_mb=0.0001)
    opt = tl.optim.SGD(model.parameters(), lr=0.1)
    x, t = _mlp_data()
    x, t = x[:, :5], t % 2
    n = len(x) // world
    for _ in range(3):
        opt.zero_grad()
        out = model(tl.tensor(x[rank * n:(rank + 1) * n]))
        tl.nn.functional.cross_entropy(out, tl.tensor(t[rank * n:(rank + 1) * n])).backward()
        opt.step()
    return {k: v.numpy().copy() for k, v in model.module.state_dict().items()}


def test_ddp_with_sync_batch_norm_equals_full_batch_training():
    res = values(run(_ddp_sync_bn, 2, timeout=60))
    model = _sync_bn_net(tl.nn)
    opt = tl.optim.SGD(model.parameters(), lr=0.1)
    x, t = _mlp_data()
    x, t = x[:, :5], t % 2
    for _ in range(3):
        opt.zero_grad()
        tl.nn.functional.cross_entropy(model(tl.tensor(x)), tl.tensor(t)).backward()
        opt.step()
    for k, v in model.state_dict().items():
        for r in range(2):
            np.testing.assert_allclose(res[r][k], v.numpy(), rtol=2e-5, atol=2e-6, err_msg=f"{k} on rank {r}")


def test_sync_batch_norm_without_a_group_is_batch_norm_and_converts_modules():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((4, 3, 6)).astype(np.float32)
    outs = []
    for m in (tl, torch):
        bn = m.nn.SyncBatchNorm(3)
        if m is torch:
            bn = m.nn.BatchNorm1d(3)           # torch's SyncBatchNorm needs a process group in training
        outs.append(bn(m.tensor(x)).detach().numpy())
        bn.eval()
        outs.append(bn(m.tensor(x)).detach().numpy())
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], outs[3], rtol=1e-5, atol=1e-6)
    for m in (tl, torch):
        net = m.nn.Sequential(m.nn.Conv2d(1, 3, 3), m.nn.BatchNorm2d(3), m.nn.Sequential(m.nn.BatchNorm1d(3)))
        conv = m.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert [type(c).__name__ for c in conv.modules()] == ["Sequential", "Conv2d", "SyncBatchNorm", "Sequential",
                                                             "SyncBatchNorm"]
        assert conv[1].weight is net[1].weight and list(conv.state_dict()) == list(net.state_dict())
    with pytest.raises(ShapeError, match="at least 2D"):
        tl.nn.SyncBatchNorm(3)(tl.ones(3))


def _checkpoint_save(rank, world):
    """Train two steps on ``world`` ranks; rank 0 writes the checkpoint while the others wait."""
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    path = os.environ["CKPT"]
    tl.manual_seed(0)
    model = DDP(MLP(20, [16], 5))
    opt = tl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    _mlp_steps(model, opt, [[(x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n])]] * 2)
    if rank == 0:
        tl.save({"model": model.module.state_dict(), "opt": opt.state_dict()}, path)
    dist.barrier()
    return os.path.exists(path)


def _checkpoint_resume(rank, world):
    """Resume on another world size: every rank loads the file, two more steps."""
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    ck = tl.load(os.environ["CKPT"])
    tl.manual_seed(123)
    module = MLP(20, [16], 5)
    module.load_state_dict(ck["model"])
    model = DDP(module)
    opt = tl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.load_state_dict(ck["opt"])
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    _mlp_steps(model, opt, [[(x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n])]] * 2)
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


# ---- tests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("world", [2, 4])
def test_all_reduce_matches_numpy_in_rank_order(world):
    res = values(run(_all_reduce, world))
    for key in res[0]:
        if key == "big":
            continue
        op, dt = key
        xs = [(_data(r, dtype=np.dtype(dt)) if dt != "int64" else np.arange(15).reshape(3, 5) * (r + 1))
              for r in range(world)]
        fn = {"SUM": np.add, "AVG": np.add, "MAX": np.maximum, "MIN": np.minimum, "PRODUCT": np.multiply}[op]
        want = xs[0].copy()
        for x in xs[1:]:
            want = fn(want, x)
        if op == "AVG":
            want = (want / world).astype(dt)
        for r in range(world):   # every rank the same bits, those of a rank-order reduction
            np.testing.assert_array_equal(res[r][key], want, err_msg=f"{key} on rank {r}")
    assert all(res[r]["big"] == 2 * world * (world + 1) / 2 for r in range(world))


@pytest.mark.parametrize("world", [2, 4])
def test_broadcast_gather_scatter_match_numpy(world):
    res = values(run(_movement, world))
    xs = [_data(r) for r in range(world)]
    for r, (b, parts, into, rs, rsl, rank, size, backend, (red, gl, sc)) in enumerate(res):
        np.testing.assert_array_equal(red, [float(world), 0.0] if r == 1 else [r + 1.0, -float(r)])
        if r == 0:
            for p, x in zip(gl, xs):
                np.testing.assert_array_equal(p, x)
        else:
            assert gl is None
        np.testing.assert_array_equal(sc, [float(r), 10.0 * r])
        np.testing.assert_array_equal(b, xs[world - 1])
        for p, x in zip(parts, xs):
            np.testing.assert_array_equal(p, x)
        np.testing.assert_array_equal(into, np.concatenate(xs))
        full = sum(np.arange(world * 4, dtype=np.float64) * (q + 1) for q in range(world))
        np.testing.assert_array_equal(rs, full[r * 4:(r + 1) * 4])
        np.testing.assert_array_equal(rsl, [world - 1.0, float(r)])
        assert (rank, size, backend) == (r, world, "gloo")


def test_a_checkpoint_written_by_rank_0_resumes_on_another_world_size(tmp_path, monkeypatch):
    from torchlean.models.mlp import MLP
    monkeypatch.setenv("CKPT", str(tmp_path / "ck.safetensors"))
    assert values(run(_checkpoint_save, 2)) == [True, True]      # the barrier: rank 1 sees the file
    res = values(run(_checkpoint_resume, 4))
    tl.manual_seed(0)
    model = MLP(20, [16], 5)
    opt = tl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _mlp_data()
    _mlp_steps(model, opt, [[(x, y)]] * 4)                     # four full-batch steps in one process
    for k, v in model.state_dict().items():
        for r in range(4):
            np.testing.assert_allclose(res[r][k], v.numpy(), rtol=2e-5, atol=2e-6, err_msg=f"{k} on rank {r}")


def test_point_to_point_and_subgroups():
    world = 4
    res = values(run(_p2p_and_groups, world))
    for r, (got, reduced, info) in enumerate(res):
        assert got == [[float((r - 1) % world), float(k)] for k in range(3)]
        members = [q for q in range(world) if q % 2 == r % 2]
        assert reduced == float(sum(members))
        assert info == (members.index(r), 2, -1, True, members)


def test_distributed_sampler_reads_the_process_group():
    assert values(run(_sampler, 3)) == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]   # torch's, padded


def test_a_collective_that_times_out_names_the_missing_rank():
    res = values(run(_late, 3, timeout=2.0))
    assert res[2] == "skipped"
    for msg in res[:2]:
        assert "all_reduce: timed out after 2.0 s" in msg and "rank(s) [2] did not arrive" in msg


def test_store_counts_waits_and_times_out():
    s = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=timedelta(seconds=5))
    try:
        c = dist.TCPStore("127.0.0.1", s.port, is_master=False, timeout=5)
        s.set("a", b"1")
        assert c.get("a") == b"1" and c.add("n", 5) == 5 and s.add("n", -2) == 3
        assert c.check(["a", "n"]) and not c.check("b")
        assert c.delete_key("a") and not c.check("a")
        with pytest.raises(DistributedError, match="key 'b' was not set within 0.2 s"):
            c.get("b", timeout=0.2)
        c.close()
    finally:
        s.close()


def test_calls_before_init_and_bad_arguments_raise():
    assert not dist.is_initialized()
    with pytest.raises(DistributedError, match="has not been initialized"):
        dist.get_rank()
    if not dist.is_nccl_available():
        with pytest.raises(DistributedError, match="nccl backend needs CuPy"):
            dist.init_process_group("nccl", rank=0, world_size=1, init_method="tcp://127.0.0.1:1")
    with pytest.raises(DistributedError, match="MASTER_ADDR"):
        env = {k: os.environ.pop(k) for k in ("MASTER_ADDR",) if k in os.environ}
        try:
            dist.init_process_group("gloo", rank=0, world_size=1)
        finally:
            os.environ.update(env)
    with pytest.raises(DistributedError, match="0 <= rank < world_size"):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=2, world_size=2)


def test_single_process_group_over_tcp():
    port = _free_port()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        t = tl.tensor([1.0, 2.0])
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.tolist() == [1.0, 2.0] and dist.get_world_size() == 1 and dist.is_initialized()
        with pytest.raises(DistributedError, match="twice"):
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


# ---- the launcher ----------------------------------------------------------------------------------

def _launch(tmp_path, script_text, *flags, timeout=90):
    import subprocess
    import sys
    script = tmp_path / "job.py"
    script.write_text(script_text)
    return subprocess.run([sys.executable, "-m", "torchlean", "launch", *flags, "--master-port", str(_free_port()),
                           str(script), str(tmp_path)], capture_output=True, text=True, timeout=timeout)


def test_launch_sets_torchruns_environment_and_runs_a_torch_program(tmp_path):
    r = _launch(tmp_path, """
import os, sys, json
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(t)
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "OMP_NUM_THREADS"]
out = {k: os.environ.get(k) for k in keys}
out["sum"] = t.tolist()
out["launched"] = dist.is_torchelastic_launched()
open(os.path.join(sys.argv[1], f"r{dist.get_rank()}.json"), "w").write(json.dumps(out))
dist.destroy_process_group()
""", "--nproc_per_node", "2")
    assert r.returncode == 0, r.stderr
    import json
    for rank in (0, 1):
        got = json.loads((tmp_path / f"r{rank}.json").read_text())
        assert got == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                       "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "OMP_NUM_THREADS": got["OMP_NUM_THREADS"],
                       "sum": [3.0, 3.0], "launched": True}
        assert got["OMP_NUM_THREADS"] == os.environ.get("OMP_NUM_THREADS", "1")


def _readme_ddp_example():
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = text[text.index("# torchlean launch --nproc-per-node 2 train_ddp.py"):]
    return code[:code.index("```")]


def test_the_readme_ddp_example_trains_on_the_cpu_backend(tmp_path):
    """The README's multi-GPU script with the CPU backend: every rank ends with rank 0's weights moved by
    the averaged gradients (the same model on both ranks), and rank 0 wrote the checkpoint."""
    code = _readme_ddp_example()
    cpu = code.replace('"nccl"', '"gloo"').replace("torch.cuda.set_device(local)\n", "").replace(".cuda()", "")
    cpu = cpu.replace(",\n            device_ids=[local])", ")")
    assert not any("cuda" in ln.split("#")[0] for ln in cpu.splitlines())     # nothing left for the GPU
    cpu = cpu.replace('"model.pt"', 'os.path.join(sys.argv[1], "model.pt")').replace("import os,", "import sys, os,")
    cpu += ("w = torch.cat([p.detach().reshape(-1) for p in model.parameters()])\n"
            "open(os.path.join(sys.argv[1], f'w{rank}.txt'), 'w').write(repr(w.tolist()))\n")
    r = _launch(tmp_path, cpu, "--nproc-per-node", "2", timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    w0, w1 = ((tmp_path / f"w{k}.txt").read_text() for k in (0, 1))
    assert w0 == w1
    sd = tl.load(str(tmp_path / "model.pt"))
    assert sorted(sd) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    np.testing.assert_array_equal(np.concatenate([sd[k].numpy().reshape(-1) for k in ("0.weight", "0.bias",
                                                                                       "2.weight", "2.bias")]),
                                  np.array(eval(w0), dtype=np.float32))


def test_worker_environment_of_a_second_machine():
    from torchlean.distributed.launch import worker_env
    env = worker_env({"PATH": "/bin"}, 1, 4, 2, 1, "10.0.0.1", 29400, "job7")
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "PATH")} == {
        "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "TORCHELASTIC_RUN_ID": "job7", "OMP_NUM_THREADS": "1",
        "PATH": "/bin"}


def test_launch_stops_the_job_when_a_worker_dies(tmp_path):
    t0 = time.monotonic()
    r = _launch(tmp_path, """
import os, sys, time
if os.environ["RANK"] == "2":
    time.sleep(0.5)
    sys.exit(3)
time.sleep(60)
""", "--nproc-per-node", "4", "--grace", "2")
    assert r.returncode == 3
    assert time.monotonic() - t0 < 30
    assert "worker rank 2 (local rank 2" in r.stderr and "exit code 3" in r.stderr and "3 other running" in r.stderr


def test_launch_forwards_sigterm_to_the_workers(tmp_path):
    import signal
    import subprocess
    import sys
    script = tmp_path / "job.py"
    script.write_text("""
import os, signal, sys, time
def bye(sig, frame):
    open(os.path.join(sys.argv[1], "term" + os.environ["RANK"]), "w").write("x")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(os.path.join(sys.argv[1], "up" + os.environ["RANK"]), "w").write("x")
time.sleep(60)
""")
    p = subprocess.Popen([sys.executable, "-m", "torchlean", "launch", "--nproc-per-node", "2", str(script),
                          str(tmp_path)], stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not all((tmp_path / f"up{r}").exists() for r in (0, 1)):
        assert time.monotonic() < end and p.poll() is None
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 128 + signal.SIGTERM
    assert (tmp_path / "term0").exists() and (tmp_path / "term1").exists()


def test_workers_die_with_a_killed_launcher(tmp_path):
    import signal
    import subprocess
    import sys
    if sys.platform != "linux":
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    script = tmp_path / "job.py"
    script.write_text("""
import os, sys, time
open(os.path.join(sys.argv[1], "pid" + os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
""")
    p = subprocess.Popen([sys.executable, "-m", "torchlean", "launch", "--nproc-per-node", "2", str(script),
                          str(tmp_path)])
    end = time.monotonic() + 60
    while not all((tmp_path / f"pid{r}").exists() for r in (0, 1)):
        assert time.monotonic() < end
        time.sleep(0.05)
    time.sleep(0.2)
    pids = [int((tmp_path / f"pid{r}").read_text()) for r in (0, 1)]
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    end = time.monotonic() + 20
    def alive(pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                return "zombie" not in f.read().lower()
        except FileNotFoundError:
            return False
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < end, "a worker outlived its killed launcher"
        time.sleep(0.05)


# ---- NCCL with one process (the multi-GPU runs need a machine with several GPUs) --------------------

@pytest.mark.cuda
def test_nccl_collectives_and_ddp_with_world_size_one():
    assert dist.is_nccl_available()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "nccl"
        x = tl.tensor(_data(0), device="cuda")
        t = x.clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        np.testing.assert_array_equal(t.cpu().numpy(), _data(0))
        dist.broadcast(t, src=0)
        parts = [tl.zeros(3, 5, device="cuda")]
        dist.all_gather(parts, x)
        into = tl.zeros(3, 5, device="cuda")
        dist.all_gather_into_tensor(into, x)
        rs = tl.zeros(3, 5, device="cuda")
        dist.reduce_scatter_tensor(rs, x, op=dist.ReduceOp.MAX)
        sc = tl.zeros(3, 5, device="cuda")
        dist.scatter(sc, [x], src=0)
        dist.barrier()
        for got in (parts[0], into, rs, sc):
            np.testing.assert_array_equal(got.cpu().numpy(), _data(0))
        with pytest.raises(DistributedError, match="nccl backend takes CUDA tensors"):
            dist.all_reduce(tl.ones(2))
        # DDP on one GPU: the same steps as the module alone
        from torchlean.models.mlp import MLP
        from torchlean.nn.parallel import DistributedDataParallel as DDP
        xs, ys = _mlp_data()
        out = []
        for wrap in (False, True):
            tl.manual_seed(0)
            m = MLP(20, [32], 5).to("cuda")
            model = DDP(m) if wrap else m
            opt = tl.optim.Adam(model.parameters(), lr=0.01)
            F = tl.nn.functional
            for _ in range(3):
                opt.zero_grad()
                F.cross_entropy(model(tl.tensor(xs, device="cuda")), tl.tensor(ys, device="cuda")).backward()
                opt.step()
            out.append({k: v.cpu().numpy() for k, v in m.state_dict().items()})
        for k in out[0]:
            np.testing.assert_array_equal(out[1][k], out[0][k])
    finally:
        dist.destroy_process_group()


# ---- several GPUs: one process each (skipped unless the machine has them) ------------------------------

def _gpus():
    return tl.cuda.device_count() if tl.cuda.is_available() else 0


def _python(code, timeout=120):
    import subprocess
    import sys
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.cuda
def test_set_device_chooses_the_gpu_of_the_process():
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    r = _python("""
import threading, torchlean as tl
from torchlean.errors import DeviceError
assert tl.cuda.is_available() and tl.cuda.current_device() == 0
tl.cuda.set_device(1)
x = tl.ones(2, device="cuda")
assert x.device == tl.device("cuda", 1) and str(x.device) == "cuda:1" and x._value.device.id == 1
assert "device='cuda:1'" in repr(x) and tl.cuda.current_device() == 1
y = tl.zeros(3).to("cuda:1") + 1
assert y._value.device.id == 1 and y.device.index == 1
out = []
t = threading.Thread(target=lambda: out.append(tl.ones(4, device="cuda")._value.device.id)); t.start(); t.join()
assert out == [1], out
for f in (lambda: x.to("cuda:0"), lambda: tl.cuda.set_device(0), lambda: tl.zeros(1, device="cuda:0")):
    try:
        f()
        raise SystemExit("no error")
    except DeviceError as e:
        assert "already uses cuda:1" in str(e), e
print("ok")
""")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    r = _python("import torchlean as tl; x = tl.zeros(2, device='cuda:1'); print(x._value.device.id, x.device)")
    assert r.returncode == 0 and r.stdout.split() == ["1", "cuda:1"], r.stderr[-2000:]
    r = _python(f"import torchlean as tl; tl.cuda.set_device({_gpus()})")
    assert r.returncode != 0 and "out of range" in r.stderr


def _nccl_collectives(rank, world):
    def cu(a):
        return tl.tensor(a, device="cuda")
    out = {}
    for op in ("SUM", "AVG", "MAX", "MIN"):
        t = cu(_data(rank))
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[op] = t.cpu().numpy()
    t = cu(_data(rank))
    dist.broadcast(t, src=world - 1)
    out["broadcast"] = t.cpu().numpy()
    into = tl.zeros(world * 3, 5, device="cuda")
    dist.all_gather_into_tensor(into, cu(_data(rank)))
    out["all_gather"] = into.cpu().numpy()
    rs = tl.zeros(3, 5, device="cuda")
    dist.reduce_scatter_tensor(rs, cu(np.concatenate([_data(rank + 10 * k) for k in range(world)])))
    out["reduce_scatter"] = rs.cpu().numpy()
    if rank == 0:
        dist.send(cu(_data(7)), dst=1)
    elif rank == 1:
        got = tl.zeros(3, 5, device="cuda")
        dist.recv(got, src=0)
        out["recv"] = got.cpu().numpy()
    dist.barrier()
    assert tl.cuda.current_device() == rank
    return out


@pytest.mark.cuda
def test_nccl_collectives_on_two_gpus_match_numpy():
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    world = 2
    res = values(run(_nccl_collectives, world, timeout=120, backend="nccl"))
    data = np.stack([_data(r) for r in range(world)])
    for r, got in enumerate(res):
        np.testing.assert_allclose(got["SUM"], data.sum(0), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["AVG"], data.mean(0), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got["MAX"], data.max(0))
        np.testing.assert_array_equal(got["MIN"], data.min(0))
        np.testing.assert_array_equal(got["broadcast"], _data(world - 1))
        np.testing.assert_array_equal(got["all_gather"], np.concatenate(list(data)))
        want = sum(_data(q + 10 * r) for q in range(world))
        np.testing.assert_allclose(got["reduce_scatter"], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got["SUM"], res[0]["SUM"])        # every rank the same bits
    np.testing.assert_array_equal(res[1]["recv"], _data(7))


def _ddp_train_cuda(rank, world):
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    F = tl.nn.functional
    tl.manual_seed(rank)
    model = DDP(MLP(20, [32, 32], 5).to("cuda"), device_ids=[rank], bucket_cap_mb=0.001)
    opt = tl.optim.Adam(model.parameters(), lr=0.01)
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    xs, ys = tl.tensor(x[rank * n:(rank + 1) * n], device="cuda"), tl.tensor(y[rank * n:(rank + 1) * n], device="cuda")
    for _ in range(4):
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        opt.step()
    return {k: v.cpu().numpy() for k, v in model.module.state_dict().items()}


@pytest.mark.cuda
def test_ddp_on_two_gpus_equals_one_gpu_training_on_the_full_batch():
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    from torchlean.models.mlp import MLP
    F = tl.nn.functional
    res = values(run(_ddp_train_cuda, 2, timeout=120, backend="nccl"))
    tl.manual_seed(0)
    model = MLP(20, [32, 32], 5).to("cuda")
    opt = tl.optim.Adam(model.parameters(), lr=0.01)
    x, y = _mlp_data()
    for _ in range(4):
        opt.zero_grad()
        F.cross_entropy(model(tl.tensor(x, device="cuda")), tl.tensor(y, device="cuda")).backward()
        opt.step()
    for k, v in model.state_dict().items():
        for r in range(2):
            np.testing.assert_allclose(res[r][k], v.cpu().numpy(), rtol=2e-5, atol=2e-6, err_msg=f"{k} on rank {r}")
        np.testing.assert_array_equal(res[1][k], res[0][k])


def _ddp_captured(rank, world):
    """DDP steps replayed from a CUDA graph (the bucket all-reduces inside it) against the same steps
    run eagerly: equal gradients and parameters."""
    from torchlean.models.mlp import MLP
    from torchlean.nn.parallel import DistributedDataParallel as DDP
    F = tl.nn.functional
    x, y = _mlp_data()
    n = _GLOBAL_BATCH // world
    xs, ys = tl.tensor(x[rank * n:(rank + 1) * n], device="cuda"), tl.tensor(y[rank * n:(rank + 1) * n], device="cuda")
    out = []
    for captured in (False, True):
        tl.manual_seed(0)
        model = DDP(MLP(20, [32, 32], 5).to("cuda"), bucket_cap_mb=0.001)
        opt = tl.optim.SGD(model.parameters(), lr=0.1)
        step = tl.cuda.capture_step(lambda a, b: F.cross_entropy(model(a), b), xs, ys) if captured else None
        grads = []
        for _ in range(3):
            opt.zero_grad()
            if captured:
                step(xs, ys)
            else:
                F.cross_entropy(model(xs), ys).backward()
            grads.append({k: p.grad.cpu().numpy() for k, p in model.module.named_parameters()})
            opt.step()
        out.append((grads, {k: v.cpu().numpy() for k, v in model.module.state_dict().items()}))
    return out


def _check_captured(res):
    for (eager_g, eager_p), (cap_g, cap_p) in res:
        for step in range(3):
            for k in eager_g[step]:
                np.testing.assert_allclose(cap_g[step][k], eager_g[step][k], rtol=1e-6, atol=1e-7, err_msg=k)
        for k in eager_p:
            np.testing.assert_allclose(cap_p[k], eager_p[k], rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.cuda
def test_ddp_inside_a_captured_step_equals_eager_ddp_one_gpu():
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        _check_captured([_ddp_captured(0, 1)])
    finally:
        dist.destroy_process_group()


@pytest.mark.cuda
def test_ddp_inside_a_captured_step_equals_eager_ddp_two_gpus():
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    _check_captured(values(run(_ddp_captured, 2, timeout=120, backend="nccl")))


def _nccl_hang(rank, world):
    t = tl.ones(4, device="cuda")
    dist.all_reduce(t)                      # both ranks: the communicator works
    if rank == 1:
        time.sleep(12)                      # rank 1 never issues the second all-reduce
        return "slept"
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        t.cpu()
        for _ in range(200):                # the error arrives from the watchdog
            time.sleep(0.05)
        return "no error"
    except DistributedError as e:
        return (str(e), time.monotonic() - start)


@pytest.mark.cuda
def test_a_hung_nccl_collective_raises_naming_the_missing_rank():
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    (s0, out0), (s1, out1) = run(_nccl_hang, 2, timeout=3, backend="nccl")
    assert s0 == "ok" and isinstance(out0, tuple), out0
    msg, took = out0
    assert "all_reduce" in msg and "rank(s) [1] did not issue it" in msg and took < 10, out0
