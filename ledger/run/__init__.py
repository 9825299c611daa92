"""A run: many attempts of one adapter on one published bank, every step appended.

- ``runner``: plan cases x attempts, drive an adapter, append every step.
- ``progress``: the counters and the summary of a run, folded from its stream with
  the one outcome resolver (``projections.outcome``) and run summary
  (``projections.runsummary``).
- ``calls``: the model calls on daemon threads, answers back in one queue.
- ``streak``: the early stop (attempts in a row failing the same way).
- ``session``: the run's one writer (batches, group commits, RunFinished).
- ``sqlpool``: the run's SQL workers started at once, used as one executor.
- ``line``: the answers judged ahead on judge threads, staged in arrival order.

One attempt (prompt, guard, execute, score) is ``ledger.harness``'s. This package sits
above ``projections``: the summary a run prints is the report's own fold.
"""
