"""Variant diagnostics of one run: how many attempts were checked and how many carry each flag.

A VariantChecked event (recorded after an attempt's ScoreComputed when the
bank has calibration variants and the SQL executed) says whether the model's
SQL also holds on the bank's variant databases. Its flags are diagnostics:
they are counted here and shown next to the score, and nothing in
``aggregates``, ``quality``, ``efficiency``, ``fairness`` or the ranking reads
them. ``total`` is the number of planned attempts (as in quality), ``checked``
the attempts whose scored batch has a VariantChecked, ``coverage`` =
checked / total.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.events import VariantChecked
from projections.caseruns import Attempt
from projections.numbers import rate
from projections.report import schema as S

__all__ = ["CONSUMES", "FLAGS", "caserun_variants", "summarize"]

CONSUMES = (VariantChecked,)
#: The flags every summary lists (0 when no attempt has them); others found are added.
FLAGS = ("scope_leak", "variant_mismatch")


def summarize(attempts: Sequence[Attempt]) -> S.VariantDiagnostics:
    """Counts of checked and flagged attempts over every planned attempt of a run.

    >>> summarize([]).flags, summarize([]).coverage
    ({'scope_leak': 0, 'variant_mismatch': 0}, None)
    """
    total = len(attempts)
    checked = flagged = 0
    flags = dict.fromkeys(FLAGS, 0)
    hashes: set[str] = set()
    for a in attempts:
        check = a.variant  # set only for a scored attempt
        if check is None:
            continue
        checked += 1
        flagged += bool(check.flags)
        hashes.add(check.calibration_sha256)
        for flag in set(check.flags):
            flags[flag] = flags.get(flag, 0) + 1
    return S.VariantDiagnostics(
        diagnostic_only=True,
        total=total,
        checked=checked,
        coverage=rate(checked, total),
        flagged=flagged,
        flags=dict(sorted(flags.items())),
        calibration_sha256=sorted(hashes),
    )


def caserun_variants(attempt: Attempt) -> S.CaseRunVariants | None:
    """The variant diagnostics of one CaseRun (None when its scored batch has none)."""
    check = attempt.variant
    if check is None:
        return None
    return S.CaseRunVariants(
        calibration_sha256=check.calibration_sha256,
        flags=sorted(set(check.flags)),
        outcomes=[
            S.VariantOutcomeRow(
                variant=o.variant_id,
                non_interfering=o.non_interfering,
                result_correct=o.result_correct,
                moved=o.moved,
                error_kind=o.error_kind,
            )
            for o in check.outcomes
        ],
    )
