"""The harness: one attempt from a bank case to its score, in data-flow order.

- ``prompt``: the blind prompt for one case (the bank's prompt.md filled in).
- ``protocol``: parse the model's raw answer (query-plan-v1) into plan, SQL, summary.
- ``limits``: the caps on what one attempt may cost (output, SQL, nesting, results);
  ``depth``: the nesting depths of a SQL text read from its tokens, before any parser.
- ``sqlparse``: one sqlglot parse per SQL text; ``determinism``: what the guard's
  deterministic check refuses, per engine; ``ast_rules``: capability rules over
  the AST; ``function_calls``: a function node's names in the engine, judged against
  its catalog (``ledger.engines.functions``); ``guard``: the static decision whether the
  SQL may run at all; ``reading``: that reading,
  also done in the SQL worker about to execute it (the engines name this module).
- The SQL then runs on the bank's engine (``ledger.engines``: its worker, typed cells).
- ``align``, ``matching``, ``compare``: the result against the frozen gold
  (column alignment, multiset rows by bipartite matching, order, tolerances);
  ``benchmark_sql``: what Spider's evaluator rewrites in SQL text first.
- ``score``: the 100-point score of one attempt under a named scorer version.
- ``claims``, ``slices``: diagnostics beside the score (is the summary true of its
  result; where the SQL first departs from the reference). Their parts:
  ``claim_words`` (the words and numbers claims are read by), ``slice_signature``
  (a query's components read) and ``slice_text`` (the canonical text they are
  compared by).
- ``pipeline``: the one judge wiring guard -> execute (crash retried once) -> score.
- ``attempt``: one adapter answer turned into the attempt's linked events.

A run of many attempts is ``ledger.run``'s, a layer above (it folds outcomes and
totals with ``projections``, which read this package's pure parts).
"""
