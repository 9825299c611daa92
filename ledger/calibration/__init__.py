"""Calibration: prove the oracle catches errors (mutants, positive controls, variant databases).

Stages, in the order data flows: ``config`` (calibration.yaml), ``operators``
(mutants of reference SQL, planted at the sites ``_sites`` finds with the AST
helpers of ``rewrite``), ``variants`` (variant databases and their gold),
``oracle`` (the real guard, worker and scorer), ``calibrate`` (kill rate and
controls), ``report`` and ``record`` (the printed report and the ledger run),
``diagnostics`` (variant flags for model runs) and ``relations`` (metamorphic
checks of gold). docs/calibration.md explains every definition.

``record`` and ``service`` (which use the runner and the ledger) are imported
from their modules, so the runner can import ``diagnostics`` without a cycle.
"""

from ledger.calibration.calibrate import CalibrationResult, calibrate, kill_rate
from ledger.calibration.config import Calibration, load_calibration, parse_calibration
from ledger.calibration.diagnostics import VariantCheck, VariantDiagnostics, variant_diagnostics
from ledger.calibration.operators import OPERATORS, Mutant, Operator, mutants_for
from ledger.calibration.relations import check_relations

__all__ = [
    "OPERATORS",
    "Calibration",
    "CalibrationResult",
    "Mutant",
    "Operator",
    "VariantCheck",
    "VariantDiagnostics",
    "calibrate",
    "check_relations",
    "kill_rate",
    "load_calibration",
    "mutants_for",
    "parse_calibration",
    "variant_diagnostics",
]
