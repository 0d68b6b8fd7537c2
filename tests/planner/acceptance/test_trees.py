"""Token trees: engine shapes and their counts, round trips through the engines' formats, acceptance,
and the sibling-rank fit on the published chain/tree pair."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from calibration.fitting.trees import TreeObservation, fit_sibling_model
from planner.acceptance import rates as acc
from planner.acceptance import trees
from planner.acceptance.trees import TreeShape

# published_specdec.csv rows PI4 / PI5 (SpecDecode-Bench blog for arXiv 2601.11580, SGLang v0.5.9,
# Qwen3-8B, H100, GSM8K, batch 1): chain k=3 at acceptance length 2.25; tree of depth 3, branching 4,
# 21 verified tokens at 2.92 ("Tree depth is fixed to 3 in all runs; ... trees use ... k=21 (branching
# factor 4)"). As SGLang flags: --speculative-num-steps 3 --speculative-eagle-topk 4
# --speculative-num-draft-tokens 21 (num_draft_tokens counts the root).
PI4_CHAIN_TAU = 2.25
PI5_TREE_TAU = 2.92
# the training table, copied into the project from shared/data (its README says how to read each column)
SHARED_CSV = Path(__file__).resolve().parents[3] / "profiles" / "data" / "published" / "published_specdec.csv"


def pi_pair() -> list[TreeObservation]:
    return [
        TreeObservation(TreeShape.chain(3), PI4_CHAIN_TAU, group="qwen3-8b/h100/gsm8k/sglang-eagle", label="PI4"),
        TreeObservation(TreeShape.from_sglang(3, 4, 21), PI5_TREE_TAU, group="qwen3-8b/h100/gsm8k/sglang-eagle",
                        label="PI5"),
    ]


# --- shapes and counts --------------------------------------------------------------------------------


def test_sglang_8_steps_topk_8_64_draft_tokens_verifies_64_tokens_in_8_draft_passes():
    shape = TreeShape.from_sglang(num_steps=8, topk=8, num_draft_tokens=64)
    # By hand: SGLang keeps num_draft_tokens - 1 = 63 drafted nodes and prepends the root (bonus)
    # token, so the verifier computes 63 + 1 = 64 tokens per sequence.
    assert shape.draft_nodes == 63
    assert shape.verify_tokens_per_seq == 64
    # num_steps = 8 drafter passes: one draft-extend on the verified token, then 7 decode steps over the
    # topk = 8 beams of each sequence.
    assert shape.draft_passes == 8
    assert shape.draft_tokens_per_pass == (1, 8, 8, 8, 8, 8, 8, 8)
    assert shape.max_draft_tokens_per_pass == 8
    assert shape.draft_tokens_per_seq == 1 + 7 * 8
    # The kept nodes are a real tree of at most 8 levels, with 63 nodes in all.
    assert sum(shape.level_widths) == 63
    assert shape.depth <= 8
    assert shape.level_widths[0] <= 8


def test_sglang_pool_bounds_num_draft_tokens():
    # topk + (num_steps - 1) * topk^2 candidates: 4 + 2 * 16 = 36 for 3 steps of topk 4, so 37 tokens.
    assert TreeShape.from_sglang(3, 4, 37).verify_tokens_per_seq == 37
    with pytest.raises(ValueError, match=r"num_draft_tokens=38"):
        TreeShape.from_sglang(3, 4, 38)


def test_chain_counts():
    shape = TreeShape.chain(4)
    assert shape.paths == ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0))
    assert (shape.draft_nodes, shape.verify_tokens_per_seq, shape.draft_passes, shape.depth) == (4, 5, 4, 4)
    assert shape.draft_tokens_per_pass == (1, 1, 1, 1)
    assert shape.is_chain


def test_explicit_tree_counts_follow_its_levels():
    shape = TreeShape.from_vllm_token_tree([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)])
    assert shape.level_widths == (3, 6)
    assert shape.verify_tokens_per_seq == 10
    assert shape.draft_passes == 2
    # pass 1 drafts depth 1 from the verified token; pass 2 runs the drafter on the 3 depth-1 nodes
    assert shape.draft_tokens_per_pass == (1, 3)


def test_planner_default_mirrors_acceptance_default_tree(catalog):
    assert TreeShape.planner_default(8, 3).paths == trees._bfs_order(acc.default_tree(8, 3))
    assert TreeShape.planner_default(8, 3).verify_tokens_per_seq == acc.tree_node_count(acc.default_tree(8, 3)) + 1
    eagle3, mtp = catalog.methods["eagle3"], catalog.methods["mtp"]
    assert TreeShape.default_for(eagle3, 5) == TreeShape.planner_default(5, 3)
    assert TreeShape.default_for(eagle3, 5, tree=False) == TreeShape.chain(5)
    assert TreeShape.default_for(mtp, 2) == TreeShape.chain(2)


# --- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize("steps,topk,n", [(8, 8, 64), (3, 4, 21), (5, 4, 8), (3, 2, 6), (6, 1, 7)])
def test_sglang_flags_round_trip(steps, topk, n):
    shape = TreeShape.from_sglang(steps, topk, n)
    flags = shape.to_sglang_flags()
    assert flags == ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
                     "--speculative-num-draft-tokens", str(n)]
    assert trees.parse_sglang_flags(flags) == shape


def test_parse_sglang_flags_reads_a_command_line_with_other_flags():
    cmd = ("python -m sglang.launch_server --model Qwen/Qwen3-8B --speculative-algorithm EAGLE "
           "--speculative-num-steps=3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 21 --tp 1")
    assert trees.parse_sglang_flags(cmd) == TreeShape.from_sglang(3, 4, 21)


def test_chain_round_trips_through_sglang_flags():
    assert TreeShape.chain(3).to_sglang_flags()[-1] == "4"  # K + 1 with topk 1
    assert trees.parse_sglang_flags(TreeShape.chain(3).to_sglang_flags()) == TreeShape.chain(3)
    assert TreeShape.from_sglang(3, 1, 4) == TreeShape.chain(3)


def test_vllm_token_tree_round_trip_in_vllm_string_form():
    shape = TreeShape.uniform((2, 2))
    text = shape.to_vllm_speculative_token_tree()
    # vLLM writes str() of breadth-first sorted tuples, as for its own default chain
    assert text == "[(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)]"
    assert TreeShape.from_vllm_token_tree(text) == shape
    # out of order and as lists: vLLM sorts breadth-first itself
    assert TreeShape.from_vllm_token_tree("[[1, 1], [0], [1], [0, 0], [1, 0], [0, 1]]") == shape
    assert shape.vllm_speculative_config_fields() == {"num_speculative_tokens": 6, "speculative_token_tree": text}
    assert TreeShape.chain(3).to_vllm_speculative_token_tree() == str([(i + 1) * (0,) for i in range(3)])


def test_vllm_refuses_a_tree_it_would_not_draft_as_stated():
    with pytest.raises(ValueError, match="level 2"):
        TreeShape.planner_default(3, 3).to_vllm_speculative_token_tree()


@pytest.mark.parametrize("shape", [TreeShape.planner_default(6, 4), TreeShape.uniform((4, 2, 1)),
                                   TreeShape.from_sglang(8, 8, 64), TreeShape.chain(5)])
def test_trtllm_choices_round_trip(shape):
    choices = shape.to_trtllm_choices()
    assert all(isinstance(c, list) for c in choices)
    back = TreeShape.from_trtllm_choices(choices)
    assert back.paths == shape.paths
    assert TreeShape.from_trtllm_choices(str(choices)).paths == shape.paths
    cfg = shape.trtllm_eagle_config()
    assert cfg["max_draft_len"] == shape.depth and len(cfg["eagle_choices"]) == shape.draft_nodes


def test_explicit_trees_have_no_sglang_flags_but_a_nearest_sglang_shape():
    tree = TreeShape.planner_default(4, 3)
    with pytest.raises(ValueError, match="explicit tree"):
        tree.to_sglang_flags()
    near = tree.as_sglang()
    assert (near.draft_passes, near.sglang_topk, near.verify_tokens_per_seq) == (4, 3, tree.verify_tokens_per_seq)


# --- acceptance -------------------------------------------------------------------------------------


@pytest.mark.parametrize("a", [0.0, 0.3, 0.62, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("k", [1, 3, 4, 8])
def test_chain_gives_the_iid_closed_form(a, k):
    # Leviathan et al. 2023, eq. 1: tau = (1 - a^(K+1)) / (1 - a), K + 1 at a = 1
    want = k + 1.0 if a == 1.0 else (1 - a ** (k + 1)) / (1 - a)
    assert float(trees.expected_acceptance_length(TreeShape.chain(k), a)) == pytest.approx(want)


def test_width_one_tree_is_the_chain_for_any_rank_decay():
    alphas = np.array([0.9, 0.7, 0.6, 0.4])
    vllm_chain = TreeShape.from_vllm_token_tree([(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)])
    for shape in (TreeShape.uniform((1, 1, 1, 1)), vllm_chain, TreeShape.from_sglang(4, 1, 5)):
        assert shape == TreeShape.chain(4)
        for decay in (0.0, 0.5, 1.0):
            assert float(trees.expected_acceptance_length(shape, alphas, decay)) == pytest.approx(
                float(acc.acceptance_length(alphas)))


def test_sglang_tree_without_sibling_acceptance_is_its_chain():
    # rank_decay 0: only rank-0 candidates are ever accepted, and the top-1 chain has the best paths
    tau = trees.expected_acceptance_length(TreeShape.from_sglang(5, 4, 16), 0.7, 0.0)
    assert float(tau) == pytest.approx(float(acc.acceptance_length_iid(0.7, 5)))


def test_geometric_sibling_model_at_rank_decay_one():
    q = trees.rank_acceptance([0.6, 0.6], 4, 1.0)
    assert q[0] == pytest.approx([0.6 * 0.4**r for r in range(4)])
    assert np.all(q.sum(axis=-1) <= 1.0)


def test_planner_default_tree_agrees_with_acceptance_module():
    for a in (0.5, 0.7, 0.85):
        q = trees.rank_acceptance([a] * 6, 3)  # the one sibling model, at its fitted rank decay
        want = acc.tree_acceptance_length(acc.default_tree(6, 3), q)
        got = trees.expected_acceptance_length(TreeShape.planner_default(6, 3), a)
        assert float(got) == pytest.approx(float(want))


def test_acceptance_grows_with_width():
    for a in (0.4, 0.7, 0.9):
        uniform = [float(trees.expected_acceptance_length(TreeShape.uniform((w, 1, 1)), a)) for w in range(1, 7)]
        assert np.all(np.diff(uniform) > 0)
        # SGLang at a fixed verify budget of 12 tokens: a wider topk only widens the pool the 11 kept
        # nodes are chosen from
        sglang = [float(trees.expected_acceptance_length(TreeShape.from_sglang(4, k, 12), a)) for k in range(2, 7)]
        assert np.all(np.diff(sglang) >= -1e-12)
        assert float(trees.expected_acceptance_length(TreeShape.chain(4), a)) < sglang[0]
        budget = [float(trees.expected_acceptance_length(TreeShape.from_sglang(4, 4, n), a)) for n in range(5, 40, 4)]
        assert np.all(np.diff(budget) > 0)


def test_acceptance_broadcasts_over_alpha_and_rank_decay():
    shape = TreeShape.from_sglang(3, 4, 21)
    alphas = np.array([[0.5, 0.5, 0.5], [0.7, 0.7, 0.7]])  # (2, D)
    decays = np.array([[0.3], [0.6], [0.9]])  # (3, 1)
    tau = trees.expected_acceptance_length(shape, alphas, decays)
    assert tau.shape == (3, 2)
    assert float(tau[1, 0]) == pytest.approx(float(trees.expected_acceptance_length(shape, 0.5, 0.6)))
    static = trees.expected_acceptance_length(TreeShape.uniform((3, 2)), alphas, decays)
    assert static.shape == (3, 2)


# --- invalid inputs -------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,match", [
    ({"num_steps": 3, "topk": -1, "num_draft_tokens": 4}, r"topk=-1"),
    ({"num_steps": 0, "topk": 4, "num_draft_tokens": 4}, r"num_steps=0"),
    ({"num_steps": 3, "topk": 4, "num_draft_tokens": 1}, r"num_draft_tokens=1"),
    ({"num_steps": 3, "topk": 4, "num_draft_tokens": 100}, r"num_draft_tokens=100"),
    ({"num_steps": 3, "topk": 1, "num_draft_tokens": 8}, r"num_draft_tokens=8 with topk=1"),
    ({"num_steps": 3, "topk": 2.5, "num_draft_tokens": 8}, r"topk=2.5"),
])
def test_invalid_sglang_shapes_raise_naming_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TreeShape.from_sglang(**kwargs)


@pytest.mark.parametrize("paths,match", [
    ([(0,), (0, 1), (1, 0, 0)], r"\(1, 0, 0\) has no parent \(1, 0\)"),
    ([(0,), (1, 2)], r"\(1, 2\) has no parent \(1,\)"),
    ([(0,), (-1,)], r"negative"),
    ([(0,), (0,)], r"listed twice"),
    ([], r"non-empty"),
    ([()], r"root"),
    ("[(0,), (0, 0", r"speculative_token_tree="),
])
def test_invalid_paths_raise_naming_the_node(paths, match):
    with pytest.raises(ValueError, match=match):
        TreeShape.from_vllm_token_tree(paths)


def test_invalid_trtllm_choices_name_eagle_choices():
    with pytest.raises(ValueError, match=r"eagle_choices: node \[0, 0, 0\] has no parent"):
        TreeShape.from_trtllm_choices([[0], [0, 0, 0]])


def test_invalid_acceptance_inputs():
    with pytest.raises(ValueError, match="alpha_per_depth=1.5"):
        trees.expected_acceptance_length(TreeShape.chain(2), 1.5)
    with pytest.raises(ValueError, match="alpha_per_depth has 2 depths but the tree needs 3"):
        trees.expected_acceptance_length(TreeShape.chain(3), [0.5, 0.5])
    with pytest.raises(ValueError, match="rank_decay=-0.5"):
        trees.expected_acceptance_length(TreeShape.uniform((2,)), 0.5, -0.5)
    with pytest.raises(ValueError, match="--speculative-num-draft-tokens"):
        trees.parse_sglang_flags(["--speculative-num-steps", "3", "--speculative-eagle-topk", "4"])


# --- the sibling fit ----------------------------------------------------------------------------------


def test_fit_on_the_published_chain_tree_pair_reproduces_both_rows():
    fit = fit_sibling_model(pi_pair())
    assert fit.success
    assert fit.labels == ("PI4", "PI5")
    # two rows, two parameters (alpha, rank_decay): an exact fit, no degrees of freedom left
    assert fit.dof == 0
    assert np.abs(fit.residuals).max() < 1e-6
    assert math.isnan(fit.rank_decay_stderr)
    # alpha is the chain's i.i.d. alpha: 1 + a + a^2 + a^3 = 2.25
    (alpha,) = fit.alpha_per_group.values()
    assert alpha == pytest.approx(float(acc.alpha_from_acceptance_length(2.25, 3)), abs=1e-6)
    assert fit.rank_decay == pytest.approx(trees.DEFAULT_RANK_DECAY, abs=0.01)
    # the same study's k=6 tree (depth 3, branching 2), reported at 2.50 by a secondary summary only:
    # the fitted model lands within 0.1 of it
    k6 = float(trees.expected_acceptance_length(TreeShape.from_sglang(3, 2, 6), alpha, fit.rank_decay))
    assert k6 == pytest.approx(2.50, abs=0.1)


def test_the_fitted_pair_matches_the_training_table():
    rows = {r["id"]: r for r in csv.DictReader(SHARED_CSV.open(newline=""))}
    pi4, pi5 = rows["PI4"], rows["PI5"]
    assert pi4["verified"] == "yes" and pi5["verified"] == "yes"
    assert (pi4["model"], pi4["gpu"]) == (pi5["model"], pi5["gpu"])
    assert pi4["tree"] == "chain" and pi4["k"] == "3"
    assert "21 verified tokens" in pi5["k"] and "depth 3" in pi5["k"] and "branching 4" in pi5["k"]
    assert float(pi4["tau"]) == PI4_CHAIN_TAU and float(pi5["tau"]) == PI5_TREE_TAU


def test_fit_recovers_known_parameters_from_noisy_synthetic_rows():
    rng = np.random.default_rng(7)
    true_alpha = {"a": 0.72, "b": 0.55}
    true_decay = 0.4
    shapes = [TreeShape.chain(3), TreeShape.chain(5), TreeShape.from_sglang(3, 4, 21), TreeShape.from_sglang(5, 4, 16),
              TreeShape.uniform((3, 2, 1)), TreeShape.planner_default(4, 3)]
    obs = []
    for g, a in true_alpha.items():
        for i, s in enumerate(shapes):
            tau = float(trees.expected_acceptance_length(s, a, true_decay)) + rng.normal(0.0, 0.003)
            obs.append(TreeObservation(s, tau, group=g, label=f"{g}{i}"))
    fit = fit_sibling_model(obs)
    assert fit.success and fit.dof == len(obs) - 3
    assert fit.rank_decay == pytest.approx(true_decay, abs=0.03)
    for g, a in true_alpha.items():
        assert fit.alpha_per_group[g] == pytest.approx(a, abs=0.01)
    assert np.isfinite(fit.rank_decay_stderr) and fit.rank_decay_stderr < 0.05
    assert np.abs(fit.residuals).max() < 0.02
    assert fit.residuals == pytest.approx(fit.predicted - fit.observed)


def test_fit_rejects_what_it_cannot_identify():
    with pytest.raises(ValueError, match="every observation is a chain"):
        fit_sibling_model([TreeObservation(TreeShape.chain(3), 2.25, "g"),
                                 TreeObservation(TreeShape.chain(4), 2.5, "g")])
    with pytest.raises(ValueError, match="too few"):
        fit_sibling_model([TreeObservation(TreeShape.from_sglang(3, 4, 21), 2.92, "g")])
    with pytest.raises(ValueError, match="acceptance_length=nan"):
        fit_sibling_model([TreeObservation(TreeShape.chain(3), float("nan"), "g", "x"),
                                 TreeObservation(TreeShape.from_sglang(3, 4, 21), 2.92, "g")])
    with pytest.raises(ValueError, match="acceptance_length=5.0"):
        fit_sibling_model([TreeObservation(TreeShape.chain(3), 5.0, "g", "x"),
                                 TreeObservation(TreeShape.from_sglang(3, 4, 21), 2.92, "g")])
    with pytest.raises(ValueError, match="empty"):
        fit_sibling_model([])


@pytest.mark.parametrize(("build", "says"), [
    (lambda: TreeShape.from_sglang(2**31, 5, 2**31), "num_steps=2147483648 is not allowed: an integer from 1 to 32"),
    (lambda: TreeShape.from_sglang(4, 1000, 9), "topk=1000 is not allowed: an integer from 1 to 32"),
    (lambda: TreeShape.from_sglang(32, 32, 2000), "num_draft_tokens=2000 is not allowed: an integer from 2 to 1025"),
    (lambda: TreeShape.chain(33), "k=33 is not allowed"),
    (lambda: TreeShape.uniform((64, 64)), "makes over 1024 nodes"),
    (lambda: TreeShape.from_vllm_token_tree([(i,) for i in range(1025)]), "1,025 nodes; a tree verifies at most 1024"),
    (lambda: TreeShape.from_vllm_token_tree([(0,) * d for d in range(1, 34)]), "is at depth 33"),
])
def test_a_stated_tree_is_bounded_before_it_is_built(build, says):
    # SGLang's --speculative-num-steps 2^31 used to allocate a 16 GB array (rank_acceptance) before any check
    with pytest.raises(ValueError, match=says):
        build()


def test_the_largest_allowed_trees_build():
    assert TreeShape.from_sglang(32, 32, 1025).verify_tokens_per_seq == 1025
    assert TreeShape.chain(32).depth == 32
