"""PlanRequest as five typed parts (planner.request): built from flat names or parts, read by flat names, replaced
with dataclasses.replace, its choices declared once as Literal types."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from planner import request as R
from planner.types import KV_CACHE_DTYPES, WEIGHT_DTYPES


def test_flat_names_go_to_their_parts():
    req = R.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tp=2, billing="fixed", ttft_slo_ms=400.0,
                        workload="code", compare_hardware=True)
    assert req.deployment == R.Deployment(model="llama-3.1-8b", hardware="h100-sxm", tp=2)
    assert req.money == R.Money(billing="fixed")
    assert req.slo == R.ServiceLevel(ttft_slo_ms=400.0)
    assert req.traffic == R.Traffic(workload="code")
    assert req.options == R.Options(compare_hardware=True)
    assert (req.tp, req.billing, req.ttft_slo_ms, req.workload) == (2, "fixed", 400.0, "code")


def test_parts_and_flat_names_combine_flat_wins():
    money = R.Money(usd_per_gpu_hour=2.5, billing="fixed")
    req = R.PlanRequest(deployment=R.Deployment("qwen3-32b", "h200", tp=4), money=money, billing="autoscaled")
    assert req.money == R.Money(usd_per_gpu_hour=2.5, billing="autoscaled")
    assert req.model == "qwen3-32b" and req.tp == 4


def test_replace_by_flat_name_keeps_every_other_field():
    req = R.PlanRequest(model="llama-3.1-8b", hardware="h100-sxm", tp=2, usd_per_gpu_hour=3.0, language="mandarin")
    out = dataclasses.replace(req, tp=8, tpot_slo_ms=20.0)
    assert out.flat() == {**req.flat(), "tp": 8, "tpot_slo_ms": 20.0}
    assert R.PlanRequest(**out.flat()) == out and hash(R.PlanRequest(**out.flat())) == hash(out)


def test_unknown_or_missing_names_are_refused_naming_them():
    with pytest.raises(TypeError, match="unknown field.*tpp"):
        R.PlanRequest(model="m", hardware="h", tpp=2)
    with pytest.raises(TypeError, match="model and hardware"):
        R.PlanRequest(model="m")


def test_every_part_field_reads_flat_and_class_reads_give_defaults():
    assert set(R.PART_OF) == {n for n, v in vars(R.PlanRequest).items() if isinstance(v, R.Flat)}
    assert R.PlanRequest.tpot_slo_ms == 50.0 and R.PlanRequest.serving == "colocated"
    assert R.PlanRequest.current_method == R.NO_SPEC
    with pytest.raises(AttributeError, match="model"):
        R.PlanRequest.model  # noqa: B018 - no default


def test_choices_are_declared_once_as_literal_types():
    assert R.TP_OPTIONS == get_args(R.TensorParallel) == (1, 2, 4, 8)
    assert R.BILLINGS == get_args(R.Billing) and R.SERVINGS == get_args(R.Serving)
    assert get_args(R.WeightDtype) == WEIGHT_DTYPES and get_args(R.KvDtype) == KV_CACHE_DTYPES
    hints = {f.name: f.type for f in dataclasses.fields(R.Deployment)}
    assert hints["tp"] == "TensorParallel" and hints["serving"] == "Serving" and hints["dtype"] == "WeightDtype"
