"""The simulator's scheduler: one asyncio loop that serves every running request per step.

Like SGLang's scheduler, each iteration is either a prefill batch (when requests wait and there is room: it
admits them and produces each one's first token) or a decode step (every running request drafts, verifies and
commits ``accepted + 1`` tokens, as one delta each). A step lasts the profile's cost for the batch, slept with
``asyncio.sleep`` against a running deadline so that sleep overshoot does not accumulate; a zero-cost profile
(the firehose) still yields to the event loop every step so the HTTP handlers can write.

The metronome profile is scheduled differently: each request gets its own exact timetable (first token after
``ttft_ms``, then one token every ``itl_ms``), still from this one loop, which wakes at the next due time.

Every ``decode_log_interval`` decode steps the loop logs SGLang's ``Decode batch`` line (and, for ddtree, the
``DDTREE metrics`` line) covering exactly those steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections import deque

from orchestrator.sim import logs
from orchestrator.sim.config import SimConfig
from orchestrator.sim.model import Drafter, Speculator
from orchestrator.sim.request import SimRequest
from orchestrator.sim.stats import ServerStats
from orchestrator.sim.timing import StepTiming

__all__ = ["MAX_PREFILL_TOKENS", "Engine"]

MAX_PREFILL_TOKENS = 16384  # tokens one prefill batch takes in, like SGLang's chunked-prefill budget
_MAX_LAG = 0.05  # seconds behind schedule after which the loop stops catching up (no bursts after a stall)


class Engine:
    """Owns the waiting queue and the running batch; ``submit`` requests, ``start`` the loop, ``close`` it."""

    def __init__(self, config: SimConfig, stats: ServerStats, log: logs.LogFn) -> None:
        self.config = config
        self.profile = config.profile
        self.stats = stats
        self._log = log
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
        self._waiting: deque[SimRequest] = deque()
        self._running: list[SimRequest] = []
        self._stalled: list[SimRequest] = []
        self._reserved = 0  # prompt + max_tokens of admitted requests (admission control)
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._intervals_logged = 0
        self._prefill_pending = [0, 0]  # sequences and tokens since the last prefill line
        self._steps_since_prefill_line = config.decode_log_interval  # the first prefill is logged at once

    # The public side, used by the HTTP handlers.

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
                await self._idle()
                deadline = loop.time()
                if self.stats.interval.steps == 0:
                    self.stats.interval.started = deadline
            batch = self._admit()
            if not batch and not self._running:
                continue  # everything that waited was cancelled
            if batch:
                new_tokens = sum(r.prompt_tokens for r in batch)
                deadline = await self._sleep_step(deadline, self.timing.prefill_seconds(new_tokens))
                self._prefill(batch, new_tokens)
            elif zero_time:
                for _ in range(burst):
                    self._decode(loop.time())
                    if not self._running:
                        break
                await asyncio.sleep(0)
            else:
                deadline = await self._sleep_step(deadline, self.timing.decode_seconds(len(self._running)))
                self._decode(loop.time())

    def _admit(self) -> list[SimRequest]:
        """Take waiting requests that fit (running slots, KV reservation, prefill budget)."""
        batch: list[SimRequest] = []
        tokens = 0
        profile = self.profile
        while self._waiting and len(self._running) + len(batch) < profile.max_running_requests:
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

    def _prefill(self, batch: list[SimRequest], new_tokens: int) -> None:
        stats = self.stats
        stats.prompt_tokens += new_tokens
        for req in batch:
            if not req.live:
                self._release(req)
                continue
            stats.kv_tokens += req.prompt_tokens
            stats.kv_tokens += req.generate(1)
            stats.generation_tokens += 1
            if req.live:
                self._running.append(req)
            else:
                self._finish(req)
        self._update_gauges()
        # SGLang prints every prefill batch; at simulated speeds that floods a journal (and its rate limit
        # would then drop Decode lines), so batches are summed into at most one line per log interval.
        pending = self._prefill_pending
        pending[0] += len(batch)
        pending[1] += new_tokens
        if self._steps_since_prefill_line >= self.config.decode_log_interval:
            self._log(
                logs.prefill_batch(
                    new_seq=pending[0],
                    new_tokens=pending[1],
                    usage=stats.token_usage,
                    running=stats.running,
                    queue=stats.queued,
                )
            )
            self._prefill_pending = [0, 0]
            self._steps_since_prefill_line = 0

    def _decode(self, now: float) -> None:
        stats = self.stats
        interval = stats.interval
        spec = self.speculator
        speculative = spec.speculative
        drafted = spec.drafted
        step = spec.step
        batch = 0
        tokens = accepted = reported = depth = 0
        ended = False
        for req in self._running:
            if not req.live:
                ended = True
                continue
            outcome = step(req.truth, req.accept_rng)
            n = req.generate(outcome.commit_len)
            batch += 1
            tokens += n
            if speculative:
                req.spec_verify_ct += 1
                accepted += n - 1 if n > 0 else 0
                reported += outcome.accepted_drafts
                depth += outcome.accepted_depth
            if not req.live:
                ended = True
        if ended:
            keep: list[SimRequest] = []
            for req in self._running:
                if req.live:
                    keep.append(req)
                else:
                    self._finish(req)
            self._running = keep
        stats.decode_steps += 1
        stats.generation_tokens += tokens
        stats.kv_tokens += tokens
        interval.steps += 1
        interval.request_steps += batch
        interval.tokens += tokens
        if speculative:
            stats.verify_steps += batch
            stats.draft_tokens += batch * drafted
            stats.accepted_tokens += accepted
            stats.spec_committed += tokens
            interval.drafted += batch * drafted
            interval.reported_drafts += reported
            interval.accepted_depth += depth
        self._update_gauges()
        self._steps_since_prefill_line += 1
        if interval.steps >= self.config.decode_log_interval:
            self._log_interval(now)

    def _release(self, req: SimRequest) -> None:
        self._reserved -= req.prompt_tokens + req.max_tokens

    def _finish(self, req: SimRequest) -> None:
        """Take a request that left the batch off the books. A stalled one is dropped by the scheduler (its
        stream just never continues) but kept, so that ``close`` can end it."""
        self._release(req)
        self.stats.kv_tokens -= req.prompt_tokens + req.completion_tokens
        if req.stalled:
            self._stalled.append(req)
        elif req.finish_reason != "abort":
            self.stats.requests_finished += 1

    def _update_gauges(self) -> None:
        stats = self.stats
        stats.running = len(self._running)
        stats.queued = len(self._waiting)
        stats.token_usage = stats.kv_tokens / self.profile.kv_capacity_tokens

    def _log_interval(self, now: float) -> None:
        stats = self.stats
        done = stats.close_interval(now)
        spec = self.speculator.speculative
        self._log(
            logs.decode_batch(
                running=stats.running,
                tokens=stats.kv_tokens,
                usage=stats.token_usage,
                accept_len=done.accept_length if spec else None,
                accept_rate=done.accept_rate if spec else None,
                throughput=stats.last_throughput,
                queue=stats.queued,
            )
        )
        if self.speculator.algorithm == "ddtree" and done.request_steps:
            self._log(
                logs.ddtree_metrics(
                    bs=max(1, round(done.request_steps / done.steps)),
                    budget=self.config.budget,
                    nodes=self.speculator.drafted + 1.0,
                    drafts=done.per_request(done.reported_drafts),
                    commit=done.accept_length,
                    depth=done.per_request(done.accepted_depth),
                )
            )
        if self.config.faults.bad_metrics:
            for line in logs.bad_metric_lines(self._intervals_logged):
                self._log(line)
        self._intervals_logged += 1

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
            while due and due[0][0] <= now:
                when, order, req = heapq.heappop(due)
                if not req.live:
                    continue
                first = req.completion_tokens == 0
                n = req.generate(1)
                self.stats.generation_tokens += n
                self.stats.kv_tokens += n
                if not first:
                    batch += 1
                    tokens += n
                if req.live:
                    heapq.heappush(due, (when + itl, order, req))
            ended = [r for r in self._running if not r.live]
            if ended:
                self._running = [r for r in self._running if r.live]
                for req in ended:
                    self._finish(req)
            if batch:
                self.stats.decode_steps += 1
                self.stats.interval.steps += 1
                self.stats.interval.request_steps += batch
                self.stats.interval.tokens += tokens
                self._update_gauges()
                if self.stats.interval.steps >= self.config.decode_log_interval:
                    self._log_interval(now)
            await asyncio.sleep(0)
