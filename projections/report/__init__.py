"""Reports: canonical JSON built from the fold, and its Markdown and HTML views.

``schema`` (the one report schema), ``build`` (the report from the fold state at a
tree size; its parts ``caserun_entry``: one CaseRun, ``totals``: a run's totals and
``runs`` row, ``jsonio``: the canonical JSON out and in), ``significance`` (a
section's statistics, ``caseledger-report/3``), ``tables`` (what both views show;
``diagnostic_tables``: the tables beside the score, ``legend``: the column
definitions and how-to-read notes), ``markdown`` and ``html`` (the views;
``html_parts``: the HTML view's style, scripts, CSP and value helpers), ``render``
(a report's bytes in one of the three formats). The package itself imports
nothing, so a fold can import ``schema`` while ``build`` imports the folds.
"""
