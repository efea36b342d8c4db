"""What `compare-models` computes, cut into shards: the forwards (groups of images) of each
shard, the job every engine runs (one picklable value), one shard's run, and the merge.

- minibatch: a permutation of the images drawn from `order_seed` (never the folder's order:
  a folder sorted by class would make each minibatch one class, and HSIC_1 would measure
  how similar the layers are within a class), cut into minibatches of `batch_size`; a last
  minibatch of fewer than 4 images is left out (said in a note). A shard is
  `shard_size // batch_size` consecutive minibatches.
- exact: all images in one forward when they fit in `batch_size`; else blocks of
  batch_size // 2 images, one forward per pair of blocks (core.compare.cka.ExactCKA), each
  forward a shard. B blocks cost B(B - 1)/2 forwards of 2 blocks, (B - 1) times the images:
  said before the run starts.

A shard's result is a dict of tensors and plain values (`ShardRun.state`), saved as
shards/shard-NNNNN.pt; the merge adds them in shard order, whichever engine made them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from inspector.batch.compare_models.pair import MatchPlan, PairItem, SideLayers
from inspector.core.compare.channels import ChannelCorrelation
from inspector.core.compare.cka import EXACT, MIN_MINIBATCH, ExactCKA, MinibatchCKA
from inspector.core.compare.grams import GramRecorder
from inspector.core.inputs.preprocess import Preprocess


@dataclass(frozen=True)
class Group:
    """One forward's images (indices into the job's sources): images[:split] the first block,
    the rest the second. `diagonal`: which blocks' own Gram blocks this forward counts (and
    whose channels it correlates: each image once); `cross`: the block between the two."""

    images: tuple[int, ...]
    split: int
    diagonal: tuple[bool, bool] = (True, False)
    cross: bool = False


@dataclass(frozen=True)
class Plan:
    estimator: str
    shards: tuple[tuple[Group, ...], ...]
    blocks: int  # exact: the number of blocks (1: one forward); minibatch: minibatches
    left_out: tuple[int, ...] = ()  # minibatch: the images of a last minibatch under 4

    def images_forwarded(self) -> int:
        return sum(len(g.images) for shard in self.shards for g in shard)


def plan(n_images: int, estimator: str, batch_size: int, shard_size: int,
         order_seed: int) -> Plan:
    if estimator == EXACT:
        return _exact_plan(n_images, batch_size)
    perm = torch.randperm(n_images, generator=torch.Generator().manual_seed(order_seed)).tolist()
    batches = [tuple(perm[i:i + batch_size]) for i in range(0, n_images, batch_size)]
    left_out: tuple[int, ...] = ()
    if batches and len(batches[-1]) < MIN_MINIBATCH:
        left_out = batches.pop()
    per_shard = max(1, shard_size // batch_size)
    groups = [Group(b, len(b)) for b in batches]
    shards = tuple(tuple(groups[i:i + per_shard]) for i in range(0, len(groups), per_shard))
    return Plan(estimator, shards, len(batches), tuple(sorted(left_out)))


def _exact_plan(n: int, batch_size: int) -> Plan:
    if n <= batch_size:
        return Plan(EXACT, ((Group(tuple(range(n)), n),),), 1)
    m = max(1, batch_size // 2)
    count = -(-n // m)
    blocks = [tuple(range(k * m, min(n, (k + 1) * m))) for k in range(count)]

    def counts_diagonal(k: int, i: int, j: int) -> bool:
        # Block k's own Gram block comes from the forward (k, k + 1), the last block's from
        # (count - 2, count - 1): fixed by the plan, whatever order the shards finish in.
        return (i, j) == ((k, k + 1) if k < count - 1 else (count - 2, count - 1))

    shards = []
    for i in range(count):
        for j in range(i + 1, count):
            group = Group(blocks[i] + blocks[j], len(blocks[i]),
                          (counts_diagonal(i, i, j), counts_diagonal(j, i, j)), True)
            shards.append((group,))
    return Plan(EXACT, tuple(shards), count)


@dataclass(frozen=True)
class CompareJob:
    """Everything a shard needs, picklable (it travels to Ray actors)."""

    sources: tuple
    pre_a: Preprocess
    pre_b: Preprocess | None  # None: B reads A's input (the same preprocessing)
    side_a: SideLayers
    side_b: SideLayers
    same_model: bool  # B is A: one forward, the same Grams
    match: MatchPlan | None
    plan: Plan
    n_images: int

    def images_of(self, shard: int) -> list[int]:
        return sorted({i for g in self.plan.shards[shard] for i in g.images})

    def empty(self):
        la, lb = len(self.side_a.names), len(self.side_b.names)
        if self.plan.estimator == EXACT:
            return ExactCKA(la, lb, self.n_images)
        return MinibatchCKA(la, lb)


class ShardRun:
    """One shard's forwards on both models, a group at a time, then its state:
    `with ShardRun(job, model_a, model_b, device, shard) as run: run.add(group, items)`
    (items: the group's images, read), `run.state()`."""

    def __init__(self, job: CompareJob, model_a, model_b, device, shard: int) -> None:
        self.job, self.device, self.shard = job, device, shard
        self.acc = job.empty()
        self.corr = ChannelCorrelation() if job.match is not None else None
        self.failed: dict[int, str] = {}
        self.skipped = 0
        self.forwards = _Forwards(job, model_a, model_b)

    def __enter__(self) -> ShardRun:
        self.forwards.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.forwards.__exit__()

    def add(self, group: Group, items: dict[int, PairItem]) -> None:
        job = self.job
        self.failed.update((i, it.error) for i, it in items.items() if it.error is not None)
        ok = [k for k, i in enumerate(group.images) if i not in self.failed]
        if job.plan.estimator != EXACT and len(ok) < MIN_MINIBATCH:
            self.skipped += 1
            return
        if not ok:
            return
        index = torch.tensor([group.images[k] for k in ok])
        first = torch.tensor([k < group.split for k in ok])
        x_a = torch.stack([items[int(i)].x_a for i in index]).to(self.device)
        x_b = None if job.pre_b is None else torch.stack(
            [items[int(i)].x_b for i in index]).to(self.device)
        grams_a, grams_b, samples = self.forwards.run(x_a, x_b)
        if isinstance(self.acc, ExactCKA):
            self.acc.add(index, first, grams_a, grams_b, group.diagonal, group.cross)
        else:
            self.acc.add(grams_a, grams_b)
        if self.corr is not None:
            _correlate(self.corr, *samples, first, group.diagonal)

    def state(self) -> dict:
        return {"shard": self.shard, "cka": self.acc.state(),
                "corr": None if self.corr is None else self.corr.state(),
                "failed": sorted(self.failed.items()), "skipped": self.skipped}


class _Forwards:
    """The Gram hooks on both models for a shard: one recorder when B is A (the union of
    both sides' layers, one forward), else one per model."""

    def __init__(self, job: CompareJob, model_a, model_b) -> None:
        self.job = job
        m = job.match
        sample_a = [] if m is None else [(m.layer_a, m.read_a, m.calls_a)]
        sample_b = [] if m is None else [(m.layer_b, m.read_b, m.calls_b)]
        a, b = job.side_a, job.side_b
        if job.same_model:
            calls = {**a.calls, **b.calls}
            self.recorders = [GramRecorder(model_a, calls, a.seq_first | b.seq_first,
                                           sample_a + sample_b)]
        else:
            self.recorders = [GramRecorder(model_a, a.calls, a.seq_first, sample_a),
                              GramRecorder(model_b, b.calls, b.seq_first, sample_b)]

    def __enter__(self) -> _Forwards:
        entered = []
        try:
            for rec in self.recorders:
                entered.append(rec.__enter__())
        except BaseException:
            for rec in reversed(entered):
                rec.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for rec in reversed(self.recorders):
            rec.__exit__()

    def run(self, x_a, x_b):
        """(A's Grams in its layers' order, B's (None: the same list), the match samples)."""
        a, b = self.job.side_a, self.job.side_b
        grams, samples = self.recorders[0].run(x_a)
        grams_a = [grams[n] for n in a.names]
        if len(self.recorders) == 1:
            grams_b = None if b.names == a.names else [grams[n] for n in b.names]
            return grams_a, grams_b, samples
        grams_b, samples_b = self.recorders[1].run(x_a if x_b is None else x_b)
        return grams_a, [grams_b[n] for n in b.names], samples + samples_b


def _correlate(corr: ChannelCorrelation, a: torch.Tensor, b: torch.Tensor,
               first: torch.Tensor, diagonal: tuple[bool, bool]) -> None:
    """The samples of the images whose block this forward counts (each image once)."""
    keep = torch.where(first, diagonal[0], diagonal[1])
    if not bool(keep.any()):
        return
    per_a, per_b = a.shape[0] // first.numel(), b.shape[0] // first.numel()
    rows_a = keep.repeat_interleave(per_a).to(a.device)
    rows_b = keep.repeat_interleave(per_b).to(b.device)
    corr.add(a[rows_a], b[rows_b])


@dataclass
class Merged:
    cka: object  # ExactCKA or MinibatchCKA
    corr: ChannelCorrelation | None
    failed: dict[int, str]
    skipped: int  # minibatches left out: fewer than 4 readable images


def merge(job: CompareJob, states: Iterable[dict]) -> Merged:
    """The shards' states added, in the order given (shard order)."""
    total = job.empty()
    corr = ChannelCorrelation() if job.match is not None else None
    failed: dict[int, str] = {}
    skipped = 0
    for state in states:
        part = type(total).from_state(state["cka"])
        total.merge(part)
        if corr is not None and state["corr"] is not None:
            corr.merge(ChannelCorrelation.from_state(state["corr"]))
        failed.update((int(i), str(e)) for i, e in state["failed"])
        skipped += int(state["skipped"])
    return Merged(total, corr, failed, skipped)
