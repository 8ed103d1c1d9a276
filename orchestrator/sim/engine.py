"""The simulator's scheduler: one asyncio loop that serves every running request per step.

Like SGLang's scheduler, each iteration is either a prefill batch (when requests wait and there is room: it
admits them and produces each one's first token) or a decode step (every running request drafts, verifies and
commits ``accepted + 1`` tokens, as one delta each). A step lasts the profile's cost for the batch, slept with
``asyncio.sleep`` against a running deadline so that sleep overshoot does not accumulate; a zero-cost profile
(the firehose) still yields to the event loop every step so the HTTP handlers can write.

The metronome profile is scheduled differently: each request gets its own exact timetable (first token after
``ttft_ms``, then one token every ``itl_ms``), still from this one loop, which wakes at the next due time.

What the engine prints and counts is its dialect's business (``orchestrator.sim.dialects``): the loop reports
every prefill batch, every decode step (as ``Counts``) and every finished request to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import random
from collections import deque
from typing import TYPE_CHECKING

from orchestrator.sim import logs
from orchestrator.sim.config import SimConfig
from orchestrator.sim.dialects import dialect_class
from orchestrator.sim.dynamic_sd import build_lookup
from orchestrator.sim.model import Drafter, Speculator
from orchestrator.sim.request import SimRequest, seed_for
from orchestrator.sim.stats import Counts, ServerStats
from orchestrator.sim.timing import StepTiming

if TYPE_CHECKING:
    from orchestrator.sim.dialects import Dialect

__all__ = ["MAX_PREFILL_TOKENS", "Engine"]

MAX_PREFILL_TOKENS = 16384  # tokens one prefill batch takes in, like SGLang's chunked-prefill budget
_MAX_LAG = 0.05  # seconds behind schedule after which the loop stops catching up (no bursts after a stall)


class Engine:
    """Owns the waiting queue and the running batch; ``submit`` requests, ``start`` the loop, ``close`` it."""

    def __init__(
        self, config: SimConfig, stats: ServerStats, log: logs.LogFn, dialect: Dialect | None = None, group: int = 0
    ) -> None:
        self.config = config
        self.profile = config.profile
        self.stats = stats
        self._log = log
        self.dialect = dialect
        self.group = group
        self.max_running = dialect_class(config.engine).max_running(config)
        self.drafter = Drafter(self.profile.top1_accuracy, self.profile.depth_decay, self.profile.rank_share)
        self.speculator = Speculator(
            config.algorithm,
            self.drafter,
            draft_tokens=config.draft_tokens,
            budget=config.budget,
            topk=config.topk,
            commit_bug=config.faults.commit_bug,
        )
        self.timing = StepTiming(self.profile, self.speculator)
        # vLLM's dynamic speculative decoding: a step's drafts by the requests in it (orchestrator/sim/dynamic_sd.py).
        self._k_lookup: list[int] | None = None
        self._by_k: dict[int, tuple[Speculator, StepTiming]] = {}
        if config.spec_schedule and not config.faults.ignore_spec_schedule:
            self._k_lookup = build_lookup(config.spec_schedule, self.max_running, config.draft_tokens)
        # --step-jitter: each decode step lasts its cost times a lognormal factor of mean 1 (noise of a known
        # level, seeded by the server seed and the scheduler group).
        self._jitter_sigma = config.step_jitter
        self._jitter_rng = random.Random(seed_for("step-jitter", config.seed, group))
        self._waiting: deque[SimRequest] = deque()
        self._running: list[SimRequest] = []
        self._stalled: list[SimRequest] = []
        self._reserved = 0  # prompt + max_tokens of admitted requests (admission control)
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    def _jitter(self) -> float:
        sigma = self._jitter_sigma
        if sigma <= 0:
            return 1.0
        return math.exp(self._jitter_rng.gauss(0.0, sigma) - sigma * sigma / 2)

    # The public side, used by the HTTP handlers.

    @property
    def in_flight(self) -> int:
        """Requests this scheduler holds (running or waiting), what a load balancer counts."""
        return len(self._running) + sum(1 for r in self._waiting if r.live)

    @property
    def busy(self) -> bool:
        """Requests are running or waiting (an engine's cache flush refuses then)."""
        return bool(self._running or any(r.live for r in self._waiting))

    def submit(self, req: SimRequest) -> None:
        """Queue ``req``; the loop admits it at its next prefill batch."""
        req.arrival = asyncio.get_running_loop().time()
        self._waiting.append(req)
        self.stats.queued = len(self._waiting)
        self._wake()

    def start(self) -> None:
        if self._task is None:
            loop_fn = self._run_metronome if self.profile.metronome else self._run_batches
            self._task = asyncio.get_running_loop().create_task(loop_fn(), name="sim-scheduler")

    async def close(self) -> None:
        """Stop the loop and end every request still waiting, running or stalled (their streams end)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for req in (*self._waiting, *self._running, *self._stalled):
            req.abort()
        self._waiting.clear()
        self._running.clear()
        self._stalled.clear()

    # The loop.

    def _wake(self) -> None:
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _idle(self, timeout: float | None = None) -> None:
        """Sleep until a request arrives (or ``timeout`` seconds pass)."""
        loop = asyncio.get_running_loop()
        self._wakeup = loop.create_future()
        handle = loop.call_later(timeout, self._wake) if timeout is not None else None
        try:
            await self._wakeup
        finally:
            self._wakeup = None
            if handle is not None:
                handle.cancel()

    async def _sleep_step(self, deadline: float, seconds: float) -> float:
        """Sleep one step of ``seconds`` measured from ``deadline``; return the new deadline."""
        if seconds <= 0:
            await asyncio.sleep(0)  # the firehose: no time passes, but the handlers must get to write
            return deadline
        loop = asyncio.get_running_loop()
        deadline += seconds
        now = loop.time()
        if deadline < now - _MAX_LAG:
            deadline = now
        await asyncio.sleep(max(0.0, deadline - now))
        return deadline

    async def _run_batches(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        zero_time = self.profile.zero_time
        burst = max(1, self.profile.steps_per_yield)
        while True:
            if not self._running and not self._waiting:
                if self.dialect is not None:
                    self.dialect.idle_hook(self.group, loop.time())
                await self._idle()
                deadline = loop.time()
            batch = self._admit()
            if not batch and not self._running:
                continue  # everything that waited was cancelled
            if batch:
                new_tokens = sum(r.prompt_tokens for r in batch)
                begin = loop.time()
                for req in batch:
                    req.admitted_at = begin
                deadline = await self._sleep_step(deadline, self.timing.prefill_seconds(new_tokens))
                self._prefill(batch, new_tokens, loop.time())
            elif zero_time:
                for _ in range(burst):
                    self._decode(loop.time())
                    if not self._running:
                        break
                await asyncio.sleep(0)
            else:
                timing = self.timing if self._k_lookup is None else self._for_batch(self._live())[1]
                step = timing.decode_seconds(len(self._running)) * self._jitter()
                deadline = await self._sleep_step(deadline, step)
                self._decode(loop.time())

    def _admit(self) -> list[SimRequest]:
        """Take waiting requests that fit (running slots, KV reservation, prefill budget)."""
        batch: list[SimRequest] = []
        tokens = 0
        profile = self.profile
        while self._waiting and len(self._running) + len(batch) < self.max_running:
            req = self._waiting[0]
            if not req.live:  # cancelled while waiting
                self._waiting.popleft()
                continue
            need = req.prompt_tokens + req.max_tokens
            if batch and (
                self._reserved + need > profile.kv_capacity_tokens or tokens + req.prompt_tokens > MAX_PREFILL_TOKENS
            ):
                break
            if not batch and self._running and self._reserved + need > profile.kv_capacity_tokens:
                break  # wait for running requests to free the cache
            self._waiting.popleft()
            self._reserved += need
            tokens += req.prompt_tokens
            batch.append(req)
        self.stats.queued = len(self._waiting)
        return batch

    def _prefill(self, batch: list[SimRequest], new_tokens: int, now: float) -> None:
        stats = self.stats
        stats.prompt_tokens += new_tokens
        done: list[SimRequest] = []
        for req in batch:
            if not req.live:
                self._release(req)
                continue
            stats.kv_tokens += req.prompt_tokens
            n = req.generate(1)  # the prefill's first token: not a verify step's
            stats.kv_tokens += n
            stats.generation_tokens += n
            req.first_token_at = now
            done.append(req)
            if req.live:
                self._running.append(req)
        self._update_gauges()
        if self.dialect is not None:
            self.dialect.prefill(self.group, done, new_tokens, now)
        for req in done:
            if not req.live:
                self._finish(req, now)

    def _live(self) -> int:
        """Requests in the next decode step (vLLM's len(num_scheduled_tokens)): the running ones still live."""
        return sum(1 for r in self._running if r.live)

    def _for_batch(self, batch: int) -> tuple[Speculator, StepTiming]:
        """The drafting (and its cost) of a step of ``batch`` requests: the configured one, or under a schedule
        the chain of ``lookup[batch]`` drafts (vllm/v1/core/sched/scheduler.py lines 1709-1714)."""
        if self._k_lookup is None or batch <= 0:
            return self.speculator, self.timing
        k = self._k_lookup[min(batch, len(self._k_lookup) - 1)]
        if k not in self._by_k:
            spec = Speculator("linear" if k else "ar", self.drafter, draft_tokens=max(k, 1))
            self._by_k[k] = (spec, StepTiming(self.profile, spec))
        return self._by_k[k]

    def _decode(self, now: float) -> None:
        stats = self.stats
        spec = self.speculator if self._k_lookup is None else self._for_batch(self._live())[0]
        speculative = spec.speculative
        drafted = spec.drafted
        step_fn = spec.step
        step = Counts(steps=1)
        tokens = accepted = reported = depth = batch = 0
        ended = False
        reshaped = speculative or len(self._running) > 1  # faults.py batch-rounding: another shape than 1 x 1
        for req in self._running:
            if not req.live:
                ended = True
                continue
            outcome = step_fn(req.truth, req.accept_rng)
            n = req.generate(outcome.commit_len, reshaped=reshaped)
            batch += 1
            tokens += n
            if speculative:
                a = n - 1 if n > 0 else 0
                req.spec_verify_ct += 1
                req.spec_accepted += a
                req.spec_drafted += drafted
                hist = req.spec_hist
                if len(hist) <= a:
                    hist.extend([0] * (a + 1 - len(hist)))
                hist[a] += 1
                step.count(a)
                accepted += a
                reported += outcome.accepted_drafts
                depth += outcome.accepted_depth
            if not req.live:
                ended = True
        step.request_steps = batch
        step.tokens = tokens
        if speculative:
            step.drafts = batch
            step.draft_tokens = batch * drafted
            step.accepted = accepted
            step.reported = reported
            step.depth = depth
        stats.decode.add(step)
        stats.generation_tokens += tokens
        stats.kv_tokens += tokens
        # The step is reported with the batch it ran (finished requests still in it and holding their cache,
        # as SGLang's batch does until it is filtered at the next step); then the finished ones leave.
        self._update_gauges()
        if self.dialect is not None:
            self.dialect.decode_step(self.group, step, now)
        if ended:
            keep: list[SimRequest] = []
            finished: list[SimRequest] = []
            for req in self._running:
                (keep if req.live else finished).append(req)
            self._running = keep
            for req in finished:
                self._finish(req, now)
            self._update_gauges()

    def _release(self, req: SimRequest) -> None:
        self._reserved -= req.prompt_tokens + req.max_tokens

    def _finish(self, req: SimRequest, now: float) -> None:
        """Take a request that left the batch off the books and tell the dialect. A stalled one is dropped by
        the scheduler (its stream just never continues) but kept, so that ``close`` can end it."""
        self._release(req)
        self.stats.kv_tokens -= req.prompt_tokens + req.completion_tokens
        req.finished_at = now
        if req.stalled:
            self._stalled.append(req)
        elif req.finish_reason != "abort":
            self.stats.requests_finished += 1
            if self.dialect is not None:
                self.dialect.request_finished(req, now)

    def _update_gauges(self) -> None:
        stats = self.stats
        stats.running = len(self._running)
        stats.queued = len(self._waiting)
        stats.token_usage = stats.kv_tokens / self.profile.kv_capacity_tokens

    async def _run_metronome(self) -> None:
        """Each request on its own exact timetable; one token per chunk."""
        loop = asyncio.get_running_loop()
        ttft = self.profile.ttft_ms / 1000.0
        itl = self.profile.itl_ms / 1000.0
        due: list[tuple[float, int, SimRequest]] = []
        seq = 0
        while True:
            while self._waiting:
                req = self._waiting.popleft()
                self._reserved += req.prompt_tokens + req.max_tokens
                self.stats.prompt_tokens += req.prompt_tokens
                self.stats.kv_tokens += req.prompt_tokens
                heapq.heappush(due, (req.arrival + ttft, seq, req))
                seq += 1
                self._running.append(req)
            self._update_gauges()
            if not due:
                await self._idle()
                continue
            now = loop.time()
            if due[0][0] > now:
                await self._idle(due[0][0] - now)
                continue
            batch = tokens = 0
            firsts: list[SimRequest] = []
            while due and due[0][0] <= now:
                when, order, req = heapq.heappop(due)
                if not req.live:
                    continue
                first = req.completion_tokens == 0
                n = req.generate(1)
                self.stats.generation_tokens += n
                self.stats.kv_tokens += n
                if first:
                    req.admitted_at = req.arrival
                    req.first_token_at = now
                    firsts.append(req)
                else:
                    batch += 1
                    tokens += n
                if req.live:
                    heapq.heappush(due, (when + itl, order, req))
            if firsts and self.dialect is not None:
                self.dialect.prefill(self.group, firsts, sum(r.prompt_tokens for r in firsts), now)
            ended = [r for r in self._running if not r.live]
            if ended:
                self._running = [r for r in self._running if r.live]
            if batch:
                step = Counts(steps=1, request_steps=batch, tokens=tokens)
                self.stats.decode.add(step)
                self._update_gauges()
                if self.dialect is not None:
                    self.dialect.decode_step(self.group, step, now)
            for req in ended:
                self._finish(req, now)
            await asyncio.sleep(0)
