"""One generation request inside the simulator: its seeded token stream, stop conditions, and the hand-off of
committed text from the scheduler loop to the HTTP handler.

Tokens are words from a fixed vocabulary, drawn from a generator seeded by (server seed, prompt, temperature,
request seed) only, so the text is the same whatever the speculative configuration (speculation is lossless)
and the same request always gets the same text: every token takes the next 8 bits of the stream, however many
tokens one step commits, so a chain, a tree and AR write the same words. Acceptance draws come from a second
generator with the same key, so the same request also gets the same acceptance. The ``wrong-token`` fault
(``wrong_token_rate``) breaks exactly that: a step that commits drafts may put a wrong word in its last accepted
draft's place, and the text goes on from a generator seeded by where it went wrong. The ``batch-rounding`` fault
(``batch_rounding_rate``) makes some positions near-ties that flip when a step computes them in another shape
than one request and one position (``generate(n, reshaped=True)``), as a kernel that is not batch-invariant
rounds. Each ``generate`` call is one scheduler step and becomes one delta, hence one streamed chunk.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random

from orchestrator.sim.model import Drafter

__all__ = ["VOCAB", "SimRequest", "seed_for"]

# 256 plain words (no characters that need JSON escaping), one token each, with the leading space of a
# sentencepiece/BPE word token.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there one all we their can has been if more when will would who so no out up into "
    "do any your what some two may other then its only time over very new could first most also these many "
    "after our before like must through where well much down should each between both under never same three "
    "another while last might great since against right came take used still long make world here way even "
    "small back good year people place thing part little life every work number state those light end water "
    "word found house form land hand high line city tree river point mind order sound open power table model "
    "token draft tree verify batch step cache graph server kernel layer expert route queue block chain depth "
    "budget accept commit bonus path node rank probe signal metric window cursor sweep plan record report "
    "host unit drop restart health ready load warm fire green blue red gold silver stone cloud rain wind snow "
    "storm night day morning evening garden field forest mountain valley ocean island bridge road street "
    "market village castle tower window door floor wall roof paper letter story music voice color number "
    "circle square simple quiet quick slow bright dark cold early late strong gentle apple orange lemon "
    "pepper salt bread honey coffee tea sugar butter cheese copper iron glass cotton wool silk leather"
)
VOCAB: tuple[str, ...] = tuple(" " + w for w in dict.fromkeys(_WORDS.split()))[:256]
assert len(VOCAB) == 256 and all(w[1:].isalpha() for w in VOCAB)


def seed_for(*parts: object) -> int:
    """A stable 64-bit seed from ``parts`` (Python's ``hash`` is salted per process; this is not)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class SimRequest:
    """A request as the scheduler sees it. The scheduler calls ``generate``; the handler awaits ``deltas``."""

    __slots__ = (
        "_loop",
        "_token_bits",
        "_token_key",
        "_waiter",
        "_wrong_rng",
        "accept_rng",
        "admitted_at",
        "arrival",
        "batch_rounding_rate",
        "completion_tokens",
        "eos_at",
        "extra",
        "finish_reason",
        "finished_at",
        "first_token_at",
        "log_metrics",
        "max_tokens",
        "pending",
        "prompt_tokens",
        "rid",
        "spec_accepted",
        "spec_drafted",
        "spec_hist",
        "spec_verify_ct",
        "stall_at",
        "stalled",
        "stop",
        "streaming",
        "text",
        "truth",
        "wrong_token_rate",
    )

    def __init__(
        self,
        *,
        rid: str,
        prompt_key: str,
        prompt_tokens: int,
        max_tokens: int,
        temperature: float,
        server_seed: int,
        request_seed: int | None,
        drafter: Drafter,
        temperature_penalty: float,
        eos_mean_tokens: float | None,
        ignore_eos: bool,
        uniform_eos: bool = False,
        stop: tuple[str, ...] = (),
        stall: bool = False,
        log_metrics: bool = True,
        streaming: bool = False,
        wrong_token_rate: float = 0.0,
        batch_rounding_rate: float = 0.0,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        key = (server_seed, prompt_key, round(temperature, 6), request_seed)
        token_rng = random.Random(seed_for("tokens", *key))
        self._token_bits = token_rng.getrandbits
        self._token_key = key
        self._wrong_rng = random.Random(seed_for("wrong-token", *key)) if wrong_token_rate > 0 else None
        self.wrong_token_rate = wrong_token_rate
        self.batch_rounding_rate = batch_rounding_rate
        self.accept_rng = random.Random(seed_for("accept", *key))
        self.truth = drafter.at_temperature(temperature, temperature_penalty)
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.stop = stop
        self.eos_at: int | None = None
        if uniform_eos and not ignore_eos:
            # The drain-tail fault (faults.py): a length uniform in 1 .. max_tokens, from the same generator.
            self.eos_at = 1 + int(token_rng.random() * max_tokens)
        elif eos_mean_tokens and not ignore_eos:
            # Exponential length with the profile's mean, drawn from the token stream's own generator.
            self.eos_at = 1 + int(-math.log1p(-token_rng.random()) * eos_mean_tokens)
        self.stall_at = max(1, max_tokens // 2) if stall else None
        self.stalled = False
        self.arrival = self._loop.time()
        self.completion_tokens = 0
        # Speculative figures of this request, as the engines keep them per request: verify steps, drafts
        # committed (bonus excluded), tokens drafted, and the steps per number of committed drafts.
        self.spec_verify_ct = 0
        self.spec_accepted = 0
        self.spec_drafted = 0
        self.spec_hist: list[int] = []
        self.log_metrics = log_metrics  # False for health probes, which no engine counts in its metrics
        self.streaming = streaming
        self.admitted_at: float | None = None  # loop time of the prefill that admitted it
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.extra: dict[str, object] = {}  # per-dialect bookkeeping (llama.cpp's slot and task ids)
        self.finish_reason: str | None = None
        self.text: list[str] = []
        self.pending: list[str] = []
        self._waiter: asyncio.Future[None] | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def live(self) -> bool:
        """Still to be scheduled: not finished, not stalled."""
        return self.finish_reason is None and not self.stalled

    def generate(self, n: int, *, reshaped: bool = False) -> int:
        """Commit up to ``n`` tokens (one scheduler step, one delta); return how many were committed.
        ``reshaped``: the step computes them in another shape than one request and one position (the
        ``batch-rounding`` fault's near-ties flip there)."""
        done = self.completion_tokens
        limit = self.max_tokens - done
        if self.eos_at is not None:
            limit = min(limit, self.eos_at - done)
        if self.stall_at is not None:
            limit = min(limit, self.stall_at - done)
        take = n if n < limit else limit
        if take <= 0:
            return 0
        bits = self._token_bits
        if take == 1:
            delta = VOCAB[bits(8)]
        else:
            words = [VOCAB[bits(8)] for _ in range(take)]
            wrong = self._wrong_rng
            if wrong is not None and wrong.random() < self.wrong_token_rate:
                # The last accepted draft (the word before the bonus) was wrong and accepted anyway: another
                # word stands there, and the target goes on from that prefix (its own continuation).
                at = take - 2
                words[at] = VOCAB[(VOCAB.index(words[at]) + 1 + wrong.randrange(255)) % 256]
                diverged = random.Random(seed_for("diverged", *self._token_key, done + at))
                self._token_bits = diverged.getrandbits
                words[at + 1 :] = [VOCAB[self._token_bits(8)] for _ in range(take - at - 1)]
            delta = "".join(words)
        if reshaped and self.batch_rounding_rate > 0:
            delta = "".join(self._rounded([delta] if take == 1 else words, done))
        self.completion_tokens = done + take
        if self.stop:
            delta = self._apply_stop(delta)
        if self.finish_reason is None:
            if self.completion_tokens >= self.max_tokens:
                self.finish_reason = "length"
            elif self.eos_at is not None and self.completion_tokens >= self.eos_at:
                self.finish_reason = "stop"
            elif self.stall_at is not None and self.completion_tokens >= self.stall_at:
                self.stalled = True
        self.text.append(delta)
        self.pending.append(delta)
        self._wake()
        return take

    def _rounded(self, words: list[str], done: int) -> list[str]:
        """The batch-rounding fault: the first near-tie among these positions takes the other token, and the
        text goes on from that prefix (seeded by where it flipped, so every configuration that flips there
        writes the same continuation)."""
        for at in range(len(words)):
            position = done + at
            tie = random.Random(seed_for("near-tie", *self._token_key, position))
            if tie.random() >= self.batch_rounding_rate:
                continue
            words[at] = VOCAB[(VOCAB.index(words[at]) + 1 + tie.randrange(255)) % 256]
            rounded = random.Random(seed_for("rounded", *self._token_key, position))
            self._token_bits = rounded.getrandbits
            words[at + 1 :] = [VOCAB[self._token_bits(8)] for _ in range(len(words) - at - 1)]
            break
        return words

    def _apply_stop(self, delta: str) -> str:
        # Look for a stop string across the end of the text so far and the new delta.
        tail_len = max(len(s) for s in self.stop)
        tail = "".join(self.text)[-tail_len:] if self.text else ""
        window = tail + delta
        hits = [i for i in (window.find(s) for s in self.stop if s) if i >= 0]
        if not hits:
            return delta
        cut = min(hits) - len(tail)
        self.finish_reason = "stop"
        if cut < 0:  # the stop string began in text already sent; nothing more of it can be taken back
            return ""
        return delta[:cut]

    def abort(self, reason: str = "abort") -> None:
        """End the request now (client gone, server stopping); the handler sees ``finished``."""
        if self.finish_reason is None:
            self.finish_reason = reason
        self.stalled = False
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def deltas(self) -> list[str]:
        """Wait for committed text; return every delta since the last call (one per scheduler step). An empty
        list means the request is finished and nothing is left."""
        while not self.pending and self.finish_reason is None:
            self._waiter = self._loop.create_future()
            await self._waiter
        out = self.pending
        self.pending = []
        return out

    @property
    def full_text(self) -> str:
        return "".join(self.text)
