"""The vectorised grid gives the same numbers as scenario-by-scenario evaluation."""

import pytest

from planner.search.scenario import efficiency_for, evaluate
from planner.search.sweep import evaluate_grid
from planner.types import Scenario


@pytest.mark.parametrize("method", ["eagle3", "medusa", "p_eagle", "draft_model"])
def test_grid_cells_match_evaluate(prior_catalog, method):
    catalog = prior_catalog  # the seed priors' mechanism (conftest.prior_catalog)
    m = catalog.methods[method]
    model = catalog.models["llama-3.1-8b"]
    hws = [catalog.hardware["h100-sxm"], catalog.hardware["l40s"]]
    wls = [catalog.workloads["chat"], catalog.workloads["code"]]
    g = evaluate_grid(model=model, draft_model=catalog.models[model.draft_model], hardware=hws, methods=[m],
                      workloads=wls, ks=[2, 5], batches=[1, 64], alphas=[m.alpha_default.mid],
                      efficiencies=[efficiency_for(catalog, h.name, "bf16") for h in hws])
    for ih, h in enumerate(hws):
        for iw, w in enumerate(wls):
            for ik, k in enumerate([2, 5]):
                for ib, b in enumerate([1, 64]):
                    ev = evaluate(Scenario(model=model.name, hardware=h.name, method=method, k=k, batch=b,
                                           workload=w.name), catalog)
                    idx = (ih, 0, ik, ib, iw, 0)
                    assert g.result.usd_per_mtok[idx] == pytest.approx(ev.usd_per_mtok, rel=1e-9)
                    assert g.result.speedup[idx] == pytest.approx(ev.speedup, rel=1e-9)
                    assert g.result.acceptance_length[idx] == pytest.approx(ev.acceptance_length, rel=1e-9)
