"""Speed of the leak check (issue 16): every prompt against every case's gold (the rule
before issue 16) vs each prompt against its own case's gold (the rule now).

Run: ``.venv/bin/python benchmarks/leak_bench.py`` (``--cases``, ``--cells``,
``--rounds``, ``--old-sample``). A synthetic bank of 2,000 cases, each with 50
one-column gold rows of distinct 14-character words and a prompt of about 1 kB
(a shared semantic layer part plus its own question). Prints seconds as median
(min-max) of the rounds.

The old rule runs each gold row's regular expression on each prompt
(prompts x all gold rows: quadratic); it is timed on ``--old-sample`` prompts
per round and scaled to all prompts (its cost per prompt does not depend on which
prompt it is). The new rule is timed on every prompt, with context building.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from ledger.bank.leak import leak_context, leak_findings
from ledger.events import Column, GoldResult

SHARED = " ".join(f"metric_{i} means the sum of column_{i} per day;" for i in range(20))


def bank(cases: int, cells: int, rng: random.Random) -> tuple[dict[str, str], list[GoldResult]]:
    col = (Column(name="v", type="VARCHAR"),)
    gold, prompts = [], {}
    for c in range(cases):
        rows = tuple((f"value{c:05d}x{r:03d}",) for r in range(cells))
        gold.append(
            GoldResult(case_id=f"c{c}", columns=col, rows=rows, digest="sha256:" + "0" * 64)
        )
        words = " ".join(
            rng.choice(["how", "many", "orders", "per", "city", "in", "2026"]) for _ in range(12)
        )
        prompts[f"c{c}"] = f"{SHARED}\nQuestion {c}: {words}?"
    return prompts, gold


def old_rule(prompts: dict[str, str], gold: list[GoldResult], sample: int) -> float:
    ctx = leak_context({}, gold)
    some = list(prompts.values())[:sample]
    for row in ctx.gold_rows:  # compiled before timing (the old code compiled at context build)
        _ = row.pattern
    t0 = time.perf_counter()
    for text in some:
        folded = text.casefold()
        for row in ctx.gold_rows:  # exactly the pre-issue-16 loop: every row's regex
            row.pattern.search(folded)
    return (time.perf_counter() - t0) * len(prompts) / len(some)


def new_rule(prompts: dict[str, str], gold: list[GoldResult]) -> float:
    t0 = time.perf_counter()
    ctx = leak_context({}, gold)
    for cid, text in prompts.items():
        assert leak_findings(text, ctx, case_id=cid) == []
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--cells", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old-sample", type=int, default=20)
    args = ap.parse_args()
    prompts, gold = bank(args.cases, args.cells, random.Random(16))  # noqa: S311 - synthetic text
    old, new = [], []
    for _ in range(args.rounds):  # interleaved, so load on a shared machine hits both
        old.append(old_rule(prompts, gold, args.old_sample))
        new.append(new_rule(prompts, gold))

    def cell(v: list[float]) -> str:
        return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"

    print(
        f"{args.cases} cases x {args.cells} gold cells, {args.rounds} rounds, "
        "seconds: median (min-max)"
    )
    print("| rule | time | old / new |")
    print("|---|---|---|")
    print(
        f"| every prompt x every case's gold (before; scaled from {args.old_sample} prompts) "
        f"| {cell(old)} | |"
    )
    print(
        f"| each prompt x its own gold (now, incl. building the context) | {cell(new)} | "
        f"{statistics.median(old) / statistics.median(new):.0f}x |"
    )


if __name__ == "__main__":
    main()
