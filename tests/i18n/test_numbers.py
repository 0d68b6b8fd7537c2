"""i18n.numbers: English is planner.formatting's text exactly; Chinese writes US$, 个月, '%' without the space and,
with the 万/亿 switch, large amounts in 万 and 亿."""

from __future__ import annotations

import math

import pytest

import i18n
from i18n import numbers as N
from planner import formatting as F

VALUES = [None, math.nan, math.inf, 0.0, -0.0004, 0.4, -546.2, 1234.0, 12_857.49, 2.5e8]


@pytest.mark.parametrize("x", VALUES)
def test_english_is_the_planners_own_text(x):
    assert N.fmt_usd(x) == F.fmt_usd(x)
    assert N.fmt_cpm(x) == F.fmt_cpm(x)
    assert N.fmt_months(x) == F.fmt_months(x)
    assert N.fmt_pct(x) == F.fmt_pct(x)


def test_chinese_money_months_and_percentages():
    with i18n.using("zh-CN"):
        assert N.fmt_usd(12_857.49) == "US$12,857"
        assert N.fmt_usd(-546.2) == "-US$546"
        assert N.fmt_usd(-0.0004) == "US$0"
        assert N.fmt_per_month(12_857.49) == "US$12,857/月"
        assert N.fmt_cpm(0.1234) == "US$0.123"
        assert N.fmt_usd(None) == N.fmt_per_month(math.nan) == "不适用"
        assert N.fmt_months(1.74) == "1.7 个月"
        assert N.fmt_months(math.inf) == "无法回本"
        assert N.fmt_months(0.0) == "立即回本"
        assert N.fmt_pct(3.21) == "+3.2%" and N.fmt_pct(-0.01) == "0.0%"
        assert N.fmt_share(0.583) == "58%"
        assert N.fmt_gpus(44) == "44 块 GPU"


def test_wan_and_yi_only_when_asked_and_only_in_chinese():
    with i18n.using("zh-CN", wan_units=True):
        assert N.fmt_usd(12_857.49) == "US$1.29万"
        assert N.fmt_usd(2.5e8) == "US$2.50亿"
        assert N.fmt_usd(9_999.0) == "US$9,999"
        assert N.fmt_cpm(12_857.0) == "US$12,857.000"  # a CPM is never in 万
    with i18n.using("en", wan_units=True):
        assert N.fmt_usd(12_857.49) == "$12,857"
    with i18n.using("zh-CN"):
        assert N.fmt_usd(2.5e8) == "US$250,000,000"


def test_token_volumes_in_billions_or_in_yi_and_wan():
    assert N.fmt_tokens(1e10) == "10.00B" and N.fmt_tokens(1.234e9, en_spec=",.3g") == "1.23B"
    with i18n.using("zh-CN"):
        assert N.fmt_tokens(1e10) == "100.00 亿"
        assert N.fmt_tokens(3.5e5, 1) == "35.0 万"
        assert N.fmt_tokens(None) == "不适用"
