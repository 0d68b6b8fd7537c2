"""Acceptance conventions: closed forms, limits, round trips, trees."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.acceptance import rates as acc
from planner.acceptance import trees

alphas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
ks = st.integers(min_value=1, max_value=16)


def test_iid_closed_form_matches_the_geometric_sum():
    # Leviathan et al. 2023, eq. 1: E[tokens] = (1 - a^(K+1)) / (1 - a) = sum_{i=0..K} a^i
    for a in (0.0, 0.3, 0.62, 0.8, 0.99):
        for k in (1, 3, 4, 8):
            assert acc.acceptance_length_iid(a, k) == pytest.approx(sum(a**i for i in range(k + 1)))


def test_per_position_vector_gives_one_plus_sum_of_cumulative_products():
    assert acc.acceptance_length([0.9, 0.5, 0.2]) == pytest.approx(1 + 0.9 + 0.45 + 0.09)


@given(alphas, ks)
def test_acceptance_length_stays_between_one_and_k_plus_one(a, k):
    tau = float(acc.acceptance_length_iid(a, k))
    assert 1.0 <= tau <= k + 1 + 1e-12


@given(ks)
def test_a_perfect_draft_emits_k_plus_one_tokens(k):
    assert float(acc.acceptance_length_iid(1.0, k)) == k + 1
    assert float(acc.acceptance_length(np.ones(k))) == k + 1


@given(st.floats(min_value=0.0, max_value=0.999), ks)
def test_alpha_round_trips_through_acceptance_length(a, k):
    tau = acc.acceptance_length_iid(a, k)
    back = float(acc.alpha_from_acceptance_length(tau, k))
    # tau is flat in alpha near 0 for large K only at the 1e-12 level; compare in tau space too
    assert float(acc.acceptance_length_iid(back, k)) == pytest.approx(float(tau), abs=1e-9)
    if k == 1 or a > 0.05:
        assert back == pytest.approx(a, abs=1e-6)


@given(st.floats(min_value=0.0, max_value=1.0), ks)
def test_draft_acceptance_rate_round_trips(rate, k):
    tau = acc.acceptance_length_from_rate(rate, k)
    assert float(acc.draft_acceptance_rate(tau, k)) == pytest.approx(rate)


def test_vllm_rate_is_not_the_per_token_alpha():
    # alpha 0.75 with K=4: accepted / drafted is far below 0.75 (the seed article's ambiguity).
    out = acc.convert(k=4, alpha=0.75)
    assert out["draft_acceptance_rate"] < 0.6
    assert out["acceptance_length"] == pytest.approx(1 + 0.75 + 0.75**2 + 0.75**3 + 0.75**4)


def test_convert_from_each_convention_agrees():
    a = acc.convert(k=3, acceptance_length_value=2.8)
    b = acc.convert(k=3, alpha=a["alpha_per_token"])
    c = acc.convert(k=3, draft_acceptance_rate_value=a["draft_acceptance_rate"])
    for key in ("alpha_per_token", "draft_acceptance_rate", "acceptance_length"):
        assert a[key] == pytest.approx(b[key], abs=1e-9) == pytest.approx(c[key], abs=1e-9)
    assert a["draft_acceptance_rate"] == pytest.approx(0.6)


@pytest.mark.parametrize("kwargs, needle", [
    ({"k": 3, "acceptance_length_value": 4.5}, "acceptance_length=4.5"),
    ({"k": 3, "alpha": 1.2}, "alpha=1.2"),
    ({"k": 0, "alpha": 0.5}, "k=0"),
    ({"k": 3, "draft_acceptance_rate_value": -0.1}, "draft_acceptance_rate=-0.1"),
    ({"k": 3}, "exactly one"),
])
def test_bad_inputs_name_the_field_and_value(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        acc.convert(**kwargs)


def test_counts_to_conditional_alpha():
    # vLLM: per_pos[i] / num_drafts is the unconditional p_i; alpha_i = p_i / p_{i-1}
    p = acc.unconditional_from_counts(np.array([60, 36, 24, 16]), 88)
    alpha = acc.conditional_from_unconditional(p)
    assert alpha[0] == pytest.approx(60 / 88)
    assert alpha[1] == pytest.approx(36 / 60)
    assert acc.acceptance_length(alpha) == pytest.approx(1 + (60 + 36 + 24 + 16) / 88)


def test_chain_tree_equals_the_chain_formula():
    q = trees.rank_acceptance([0.7] * 4, 1)
    assert acc.tree_acceptance_length(acc.chain_tree(4), q) == pytest.approx(acc.acceptance_length_iid(0.7, 4))


def test_a_wider_tree_accepts_more_but_costs_more_nodes():
    q = trees.rank_acceptance([0.62] * 4, 3)
    chain = acc.tree_acceptance_length(acc.chain_tree(4), q)
    tree = acc.default_tree(4, 3)
    wide = acc.tree_acceptance_length(tree, q)
    assert wide > chain
    assert acc.tree_node_count(tree) > 4
    # effective acceptance: the chain alpha that would give the tree's tau at the same depth
    assert float(acc.effective_chain_alpha(wide, 4)) > 0.62


def test_sibling_rows_are_exclusive_probabilities():
    q = trees.rank_acceptance(np.array([[0.3] * 3, [0.9] * 3]), 4, 0.9)
    assert np.all(q.sum(axis=-1) <= 1.0 + 1e-12)
    assert np.all(np.diff(q, axis=-1) <= 0)  # lower rank, lower acceptance


def test_tree_validation_names_the_orphan_node():
    with pytest.raises(ValueError, match=r"\(0, 1\).*no parent \(0,\)"):
        acc.tree_acceptance_length(((1,), (0, 1)), trees.rank_acceptance([0.5, 0.5], 2))


def test_alpha_inversion_is_exact_at_the_ends_and_the_same_on_both_paths():
    """tau = K + 1 means every draft is accepted (alpha 1), tau = 1 none (alpha 0); the few-value path (floats)
    and the array path (numpy) give the same alpha, which reproduces tau to 1e-12."""
    assert float(acc.alpha_from_acceptance_length(9.0, 8)) == 1.0
    assert float(acc.alpha_from_acceptance_length(1.0, 8)) == pytest.approx(0.0, abs=1e-15)
    ks = np.repeat(np.arange(1, 9), 50).astype(float)
    taus = 1.0 + np.tile(np.linspace(0.0, 1.0, 50), 8) * ks
    big = acc.alpha_from_acceptance_length(taus, ks)  # 400 values: the array path
    small = np.concatenate([acc.alpha_from_acceptance_length(taus[i:i + 40], ks[i:i + 40]) for i in range(0, 400, 40)])
    np.testing.assert_allclose(small, big, atol=1e-12)
    back = np.array([sum(a ** i for i in range(int(k) + 1)) for a, k in zip(big, ks, strict=True)])
    np.testing.assert_allclose(back, taus, atol=1e-12)
