"""caseledger read side: pure folds over the event log.

The modules in data-flow order:

- ``replay``: the one fold loop; ``outcome``: which event ends an attempt.
- ``caseruns``: the fold by (run, case, attempt); ``caseruns_table``: it as one
  flat table.
- ``numbers``: exact arithmetic and the report's rounding.
- ``aggregates``, ``quality``, ``efficiency``, ``fairness``, ``variants``,
  ``calibration``: the views a report section is made of; ``runsummary``: the
  end-of-run figures ``caseledger run`` prints.
- ``slices``, ``claims``: the diagnostics of one run; ``benchmark``: a BIRD or
  Spider bank's own verdict beside caseledger's.
- ``metrics``: the one definition of every gateable metric; ``statistics``: error
  bars, paired comparisons, rank groups.
- ``report/``: the report schema, its build, Markdown and HTML views.
- ``gate``: the regression gate; ``gate_text``: its verdict as text.

Nothing here imports ``ledger.store``, appends, or calls a model or the network.
"""
