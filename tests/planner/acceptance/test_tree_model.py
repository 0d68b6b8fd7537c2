"""One tree model: the search, evaluate and the fit all price a token tree with planner.acceptance.trees' sibling model.
"""

import numpy as np
import pytest

from planner.acceptance import trees
from planner.acceptance.trees import TreeShape
from planner.context import Candidate, make_context
from planner.request import PlanRequest
from planner.search.candidates import candidate_tau
from planner.search.scenario import evaluate
from planner.types import Scenario


def test_the_planner_prices_its_default_tree_with_the_fitted_sibling_model(prior_catalog):
    """A tree candidate without a stated shape: tau is trees.expected_acceptance_length of the planner's default
    tree at DEFAULT_RANK_DECAY (one model for the search, evaluate and the fit)."""
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    req = PlanRequest(model="llama-3.1-8b", hardware="h100-sxm")
    ctx = make_context(req, catalog)
    cand = Candidate("eagle3", (2, 4), tree=True)
    tau, nver, a1 = candidate_tau(ctx, cand, ctx.mid_samples(), np.array([2.0, 4.0]))
    decay = catalog.methods["eagle3"].position_decay
    for i, k in enumerate((2, 4)):
        alphas = float(a1[0, 0]) * decay ** np.arange(k)
        shape = TreeShape.planner_default(k, 3)
        want = trees.expected_acceptance_length(shape, alphas, trees.DEFAULT_RANK_DECAY)
        assert float(tau[0, i, 0]) == pytest.approx(float(want), rel=1e-12)
        assert nver[0, i, 0] == shape.verify_tokens_per_seq
    ev = evaluate(Scenario(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", k=4, batch=8, tree=True),
                  catalog)
    alphas = ev.alpha_per_position
    assert ev.acceptance_length == pytest.approx(float(trees.expected_acceptance_length(
        TreeShape.planner_default(4, 3), np.array(alphas))), rel=1e-12)
