"""Operating points: the candidates a plan weighs (candidates.py), what drafting costs (drafting.py), what fits
memory (memory.py), the K x batch search under the SLO (grid.py), the operating point records built from it
(points.py), one configuration evaluated (scenario.py) with its TTFT (ttft_scenario.py), the vectorised grid (sweep.py),
and the what-if sweeps over batch, alpha x K and K per batch (batch_sweeps.py)."""
