"""docs/gate.md matches projections/metrics.py, and its configuration examples are valid."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from projections import gate, metrics

DOC = (Path(__file__).resolve().parents[2] / "docs" / "gate.md").read_text("utf-8")


def test_metric_table_is_the_metrics_module() -> None:
    block = DOC.split("<!-- metrics-table:start -->")[1].split("<!-- metrics-table:end -->")[0]
    rows = [line for line in block.strip().splitlines()[2:]]
    documented = [tuple(c.strip().strip("`") for c in r.strip("|").split("|")) for r in rows]
    expected = [(m.name, m.direction, str(m.tolerance), ".".join(m.path)) for m in metrics.METRICS]
    assert documented == expected


def test_configuration_examples_are_valid() -> None:
    toml_text = re.search(r"```toml\n(.*?)```", DOC, re.S).group(1)
    table = tomllib.loads(toml_text)["tool"]["caseledger"]["gate"]
    config = gate.config_from_mapping(table, "docs toml")
    assert (config.enabled, config.min_n, str(config.tolerances["dimension.*"])) == (
        True, 20, "3.0",
    )  # fmt: skip
    yaml_text = re.search(r"```yaml\n(.*?)```", DOC, re.S).group(1)
    config = gate.config_from_mapping(yaml.safe_load(yaml_text)["gate"], "docs yaml")
    assert str(config.tolerances["tokens_per_correct"]) == "0.15-r"
