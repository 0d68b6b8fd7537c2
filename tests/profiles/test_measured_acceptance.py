"""The customer's measured acceptance from what their engine writes (profiles/measured_acceptance.py): each format
gives the per-position rates computed here by hand from the file's own numbers, the conditional alphas the planner
takes, and clear refusals; the CLI's --acceptance-file puts it in the customer tier."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.measured_acceptance import MeasuredAcceptanceError, read_measured_acceptance

ROOT = Path(__file__).resolve().parents[2]

# vLLM's /metrics counters as a speculating server exposes them (two engines: the reader sums label sets)
METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 600.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 400.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 480.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 320.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 360.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 240.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 240.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 160.0
"""


def test_metrics_text_gives_the_per_position_rates_and_conditional_alphas():
    m = read_measured_acceptance("metrics.txt", METRICS.encode())
    # accepted per position over drafts: (480+320)/1000, (360+240)/1000, (240+160)/1000
    assert m.unconditional == pytest.approx((0.8, 0.6, 0.4))
    assert m.per_position == pytest.approx((0.8, 0.6 / 0.8, 0.4 / 0.6))
    assert m.k == 3 and m.drafts == 1000 and m.acceptance_length == pytest.approx(2.8)
    assert "Prometheus" in m.fmt and "tau 2.80" in m.describe()


def test_a_bench_result_and_a_rates_csv_read_the_same_rates():
    bench = json.dumps({"spec_decode_num_drafts": 1000, "spec_decode_acceptance_length": 2.8,
                        "spec_decode_per_position_acceptance_rates": [0.8, 0.6, 0.4]}).encode()
    rates = b"position,rate\n1,0.8\n2,0.6\n3,0.4\n"
    for name, data in (("bench.json", bench), ("rates.csv", rates)):
        m = read_measured_acceptance(name, data)
        assert m.unconditional == pytest.approx((0.8, 0.6, 0.4)) and m.k == 3, name


def test_a_histogram_of_accepted_drafts_per_step():
    # 300 steps: 100 accepted none, 80 one, 60 two, 60 all three -> p_i = steps with >= i accepted / 300
    m = read_measured_acceptance("hist.csv", b"accepted,count\n0,100\n1,80\n2,60\n3,60\n")
    assert m.unconditional == pytest.approx((200 / 300, 120 / 300, 60 / 300))
    assert m.drafts == 300 and m.acceptance_length == pytest.approx(1 + 380 / 300)


@pytest.mark.parametrize(("name", "data", "says"), [
    ("rates.csv", b"position,rate\n1,0.5\n2,0.7\n", "never grow"),
    ("rates.csv", b"position,rate\n1,80\n", "fraction from 0 to 1"),
    ("x.csv", b"a,b\n1,2\n", "expected 'position,rate'"),
    ("bench.json", b'{"output_throughput": 10}', "spec_decode_per_position_acceptance_rates"),
    ("metrics.txt", b"# HELP vllm:spec_decode_num_drafts_total x\n# TYPE vllm:spec_decode_num_drafts_total counter\n"
                    b"vllm:spec_decode_num_drafts_total 0\n", "has not speculated"),
    ("hist.csv", b"accepted,count\n0,10\n1,-2\n", "count >= 0"),
    ("big.csv", b"x" * (4 * 1024 * 1024 + 1), "at most 4,194,304 bytes"),
])
def test_refusals_name_the_file_and_what_is_expected(name, data, says):
    with pytest.raises(MeasuredAcceptanceError, match=name) as e:
        read_measured_acceptance(name, data)
    assert says in str(e.value)


def test_the_cli_takes_it_as_the_customer_tier(tmp_path):
    f = tmp_path / "metrics.txt"
    f.write_text(METRICS)
    out = subprocess.run([sys.executable, "-m", "planner", "evaluate", "--model", "llama-3.1-8b", "--hardware",
                          "h100-sxm", "--method", "eagle3", "--workload", "chat", "--acceptance-file", str(f)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    js = json.loads(out.stdout)
    assert js["k"] == 3 and js["acceptance_length"] == pytest.approx(2.8)
    assert js["acceptance_tier"] == "customer"
    bad = subprocess.run([sys.executable, "-m", "planner", "evaluate", "--model", "llama-3.1-8b", "--hardware",
                          "h100-sxm", "--method", "eagle3", "--acceptance-file", str(tmp_path / "none.csv")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "--acceptance-file" in bad.stderr
