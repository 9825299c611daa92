"""A run's model calls on daemon threads, their answers back through one queue.

Part of the runner (``ledger.run.runner``): ``Calls`` makes each call under its
retry policy and never runs more than ``concurrency`` answers ahead of the recording
thread; ``AdapterFault`` carries an exception the adapter raised to that thread.
"""

from __future__ import annotations

import collections
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from ledger.adapters.base import Adapter, Answer, Request, RetryPolicy, call_with_retries
from ledger.harness.attempt import AttemptKey

Outcome = Answer | Exception


class Calls:
    """Model calls on daemon threads; their answers come back through one queue.

    Daemon threads because a stopped run must not wait for a slow model at exit.
    An exception raised by the adapter is an outcome too: the caller's thread
    re-raises it after recording what it can. Each call is retried under
    ``policy`` (``ledger.adapters.base.call_with_retries``); ``stop`` also ends a
    wait between tries at once. At most ``workers`` calls are made and not yet taken
    by the recording thread: calls never run ahead of the records (an early stop
    stops after about N calls, not after every fast failure of the plan).
    """

    def __init__(
        self,
        adapter: Adapter,
        policy: RetryPolicy,
        workers: int,
        requests: Sequence[Request],
        clock: Callable[[], str],
    ) -> None:
        self._adapter, self._policy, self._clock = adapter, policy, clock
        self.requests = tuple(requests)
        self._pending = collections.deque(requests)
        self._lock = threading.Lock()
        self._stopped = False
        self._waking = threading.Event()
        self._rng = random.Random()  # noqa: S311 (backoff jitter only)
        self._taken = self._received = 0
        count = min(max(1, workers), len(requests))
        self._slots = threading.Semaphore(count)
        self.started: set[AttemptKey] = set()
        self.answered: set[AttemptKey] = set()
        self._results: queue.Queue[tuple[Request, Outcome]] = queue.Queue()
        for n in range(count):
            threading.Thread(target=self._work, name=f"caseledger-call-{n}", daemon=True).start()

    def _next(self) -> Request | None:
        # Checking the stop flag and taking a request under one lock makes
        # ``_taken`` final once stop() returns.
        with self._lock:
            if self._stopped or not self._pending:
                return None
            self._taken += 1
            request = self._pending.popleft()
            self.started.add((request.case_id, request.attempt))
            return request

    def _work(self) -> None:
        while True:
            self._slots.acquire()  # given back when the outcome is taken (get)
            request = self._next()
            if request is None:
                self._slots.release()
                return
            outcome: Outcome
            try:
                outcome = call_with_retries(
                    self._adapter, request, self._policy, clock=self._clock, stop=self._waking
                )
            except Exception as exc:  # not hidden: the caller's thread re-raises it
                outcome = exc
                self.stop()  # a broken adapter gets no further request
            self._results.put((request, outcome))

    def get(self, timeout: float | None = None) -> tuple[Request, Outcome]:
        """The next outcome, in completion order (blocks; a KeyboardInterrupt gets through).

        Raises:
            queue.Empty: nothing came within ``timeout`` seconds.
        """
        item = self._results.get(timeout=timeout)
        self._slots.release()
        self._received += 1
        self.answered.add((item[0].case_id, item[0].attempt))
        return item

    def stop(self, *, wake: bool = False) -> None:
        """Start no further call; ``wake``: also end every wait between tries now."""
        with self._lock:
            self._stopped = True
        if wake:
            self._waking.set()

    def in_flight(self, within: float | None = None) -> Iterable[tuple[Request, Outcome]]:
        """Stop (ending waits between tries), then yield the outcomes of the calls already
        started as they arrive; ``within``: for at most that many seconds."""
        self.stop(wake=True)
        deadline = None if within is None else time.monotonic() + within
        while self._received < self._taken:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            try:
                yield self.get(left)
            except queue.Empty:
                return


class AdapterFault(Exception):
    """Internal: the adapter raised on a call (a harness fault, never a model's)."""

    def __init__(self, request: Request, error: Exception) -> None:
        super().__init__(str(error))
        self.request, self.error = request, error
