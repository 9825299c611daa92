"""The words and numbers a summary's claims are read by (English and Chinese).

Part of ``ledger.harness.claims``: the patterns of totals, each-of, negation,
approximation, extremes, directions and comparisons, and the number forms (Arabic and
Chinese numerals, scales, units, dates and ordinals that are not claims) with the
value of a Chinese numeral and the text of a value.
"""

from __future__ import annotations

import re
from decimal import Decimal

# ----------------------------------------------------------------- words

_TOTAL_LABELS = frozenset(
    {"合计", "总计", "总额", "全部", "整体", "总体", "所有", "全量", "总和", "汇总"}
    | {"total", "grand total", "all", "overall", "sum"}
)
_TOTAL_WORDS = re.compile(
    r"合计|总计|总额|总共|一共|共计|整体|总体|全部|全量|总和|汇总|"
    r"\b(?:in total|total|overall|altogether|combined|all together)\b",
    re.IGNORECASE,
)
_EACH_WORDS = re.compile(r"各|每个|每家|都|均|\b(?:each|every|both|all)\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"不|没有|没|无|未|非|除|\b(?:not|no|none|never|without|except|excluding|neither|nor)\b|n't",
    re.IGNORECASE,
)
_APPROX = re.compile(
    r"约|大约|大概|左右|近|将近|接近|差不多|\b(?:about|around|approximately|approx|roughly|"
    r"nearly|almost|some)\b|~|≈",
    re.IGNORECASE,
)
_RESPECTIVELY = re.compile(r"分别|依次|\brespectively\b", re.IGNORECASE)
_BOUNDS: tuple[tuple[str, str], ...] = (
    (r"不少于|不低于|至少|\bat least\b|\bno less than\b|\bno fewer than\b", ">="),
    (r"不超过|不多于|不高于|至多|最多不超过|\bat most\b|\bno more than\b", "<="),
    (
        r"超过|多于|高于|大于|逾|\bmore than\b|\bover\b|\babove\b|\bgreater than\b|"
        r"\bexceed(?:s|ed|ing)?\b",
        ">",
    ),
    (r"不到|少于|低于|小于|不足|\bless than\b|\bfewer than\b|\bunder\b|\bbelow\b", "<"),
)
_MAX_WORDS = re.compile(
    r"最高|最多|最大|最好|最强|第一名|\b(?:highest|largest|most|biggest|greatest|top|best|"
    r"maximum|max)\b",
    re.IGNORECASE,
)
_MIN_WORDS = re.compile(
    r"最低|最少|最小|最差|最弱|垫底|\b(?:lowest|smallest|least|fewest|worst|minimum|min)\b",
    re.IGNORECASE,
)
_UP_WORDS = re.compile(
    r"上升|增长|增加|提高|提升|上涨|升高|升至|升到|走高|变好|改善|回升|"
    r"\b(?:rose|rise|rises|risen|rising|up|increased?|increases|increasing|grew|grow|grows|"
    r"grown|growing|improved?|improves|improving|climbed?)\b",
    re.IGNORECASE,
)
_DOWN_WORDS = re.compile(
    r"下降|减少|降低|下滑|下跌|回落|降至|降到|走低|变差|恶化|萎缩|"
    r"\b(?:fell|fall|falls|fallen|falling|down|decreased?|decreases|decreasing|declined?|"
    r"declines|declining|dropped|drops?|dropping|worsened|worse|shrank|shrunk)\b",
    re.IGNORECASE,
)
_GREATER = re.compile(
    r"高于|多于|大于|超过|胜过|\b(?:more than|higher than|greater than|larger than|bigger than|"
    r"above|exceeds?|exceeded|outsold|ahead of)\b|比.{1,12}?(?:高|多|大)",
    re.IGNORECASE,
)
_LESS = re.compile(
    r"低于|少于|小于|不及|不如|\b(?:less than|fewer than|lower than|smaller than|below|behind)\b|"
    r"比.{1,12}?(?:低|少|小)",
    re.IGNORECASE,
)
_KIND_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("percent", re.compile(r"率|占比|比例|比重|%|\b(?:rate|ratio|share|percent\w*)\b", re.I)),
    (
        "yuan",
        re.compile(r"金额|销售额|收入|营收|元|块|\b(?:amount|revenue|yuan|rmb|gmv)\b", re.I),
    ),
    ("orders", re.compile(r"单数|笔数|订单数|单量|\b(?:orders|count|number of)\b", re.I)),
)

# Column-name hints: which unit a column carries.
_COLUMN_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("percent", re.compile(r"rate|ratio|pct|percent|share|proportion|conversion|率|占比|比例")),
    ("orders", re.compile(r"count|cnt|num|orders|qty|quantity|单数|笔数|数量|次数|^n$|^n_")),
    ("yuan", re.compile(r"amount|amt|revenue|gmv|price|cost|yuan|money|金额|销售额|收入|元")),
)

# ----------------------------------------------------------------- numbers

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6}
_CN_DIGITS |= {"七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}
_SCALES = {
    "千": 1000,
    "万": 10_000,
    "亿": 100_000_000,
    "百万": 1_000_000,
    "千万": 10_000_000,
    "thousand": 1000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "k": 1000,
}
_UNIT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("percent_points", r"个百分点|\bpercentage points?\b|\bpp\b|\bpts?\b"),
    ("percent", r"%|\bpercent\b|\bper cent\b"),
    ("yuan", r"元|块钱|块|\byuan\b|\brmb\b|\bcny\b"),
    ("orders", r"单|笔|个订单|次|\borders?\b|\bsales\b|\btransactions?\b|\bpurchases?\b"),
    ("rows", r"行|条记录|条|\brows?\b|\brecords?\b"),
    ("items", r"家门店|家店|家|个门店|个|位|名|\bstores?\b|\bitems?\b|\bshops?\b"),
)
_UNIT_RE = re.compile(
    r"\s*(?:" + "|".join(f"(?P<{n}>{p})" for n, p in _UNIT_PATTERNS) + ")", re.IGNORECASE
)
_SCALE_RE = re.compile(r"\s*(百万|千万|千|万|亿|thousand\b|million\b|billion\b)", re.IGNORECASE)
_ARABIC = re.compile(
    r"(?<![A-Za-z0-9_.,\-/:])(?P<cur>[¥￥$])?\s*(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?P<k>[kK](?![A-Za-z]))?"
)
_CN_NUM = re.compile(r"(?P<pct>百分之)?(?P<num>[零〇一二两三四五六七八九十百千万亿]+)")
# Dates, times and periods are masked before numbers are read (never claims).
_DATES = re.compile(
    r"\d{4}\s*[-/.年]\s*\d{1,2}(?:\s*[-/.月]\s*\d{1,2}\s*[日号]?)?(?:\s*月)?|"
    r"\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*[日号]|\d{1,2}:\d{2}(?::\d{2})?|"
    r"\b(?:19|20)\d{2}\b(?!\s*(?:%|元|单|笔|行|rows?|orders?|yuan))|"
    r"\d+\s*(?:年|季度|周|天|小时|分钟|秒|岁|days?|weeks?|months?|years?|hours?|minutes?)",
    re.IGNORECASE,
)
_ORDINAL = re.compile(r"(?:第|前|后|top|bottom|no\.|#|q)\s*$", re.IGNORECASE)


def _cn_value(text: str) -> int | None:
    """A Chinese numeral as an integer (六百 -> 600, 九千六百 -> 9600, 十二 -> 12);
    None when it is not one well-formed number."""
    total = section = 0
    digit: int | None = None
    if text in ("零", "〇"):
        return 0
    for ch in text:
        if ch in ("零", "〇"):
            if digit is not None:
                return None
            continue  # 三百零一: a place left empty
        if ch in _CN_DIGITS:
            if digit is not None:
                return None  # two digits in a row (一二) is a list, not a number
            digit = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (1 if digit is None else digit) * _CN_UNITS[ch]
            digit = None
        elif ch in _CN_BIG:
            section += digit or 0
            if section == 0:
                return None
            total += section * _CN_BIG[ch]
            section, digit = 0, None
        else:
            return None
    return total + section + (digit or 0)


def _fmt(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text
