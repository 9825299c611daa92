"""Application services: the library calls one command makes, between ``cli`` and the rest.

- ``evaluate``: the one run sequence, a published bank and an adapter wired into the
  runner (``run``, the demo and ``ledger.api`` call it).
- ``snapshot``: read the log into a projection state, every byte checked on the way
  (through ``ledger.tree_index`` and ``ledger.stream_read``).
- ``reporting``: report bytes from a ledger at a tree size.
- ``rescore``: re-apply a scorer to recorded evidence; ``verify --recompute``.
- ``baseline``, ``baseline_check``: freeze, check and pin a run as a baseline.
- ``gate_inputs``: what the gate reads (a report file, a ledger run, a baseline).
- ``withdraw``: withdraw a run (a signed ``run.withdrawn.v1``; its events stay).
- ``audit``: the auditor's export (verify and recompute without a private key).
- ``exchange``: ``export run`` / ``import run``, runs between machines; ``trust``: the
  keys this ledger trusts to sign runs made elsewhere (``signers``).
- ``export_caseruns``: the CaseRuns table as Parquet or CSV.
- ``compare``: two runs of one bank paired by case.
- ``diagnostics``: what ``slices`` and ``claims`` share (read a run, append one
  batch of diagnostic events); ``slices``, ``claims``: record and count them.
- ``importing``: ``bank import bird|spider``, one bank per database, each validated.
- ``demo``: the main job on the built-in default.
- ``output``: where a command's ``-o`` goes (stdout, a device in place, a file atomically).

Services read and write through ``ledger.store``; what they show is folded by
``projections``. Nothing here parses command-line options or prints.
"""
