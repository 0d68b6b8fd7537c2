"""Operating points: the candidates a plan weighs (candidates.py), what drafting costs (drafting.py), what fits
memory (memory.py), the K x batch search under the SLO (grid.py), the operating point records built from it
(points.py), one configuration evaluated (scenario.py) and the vectorised grid (sweep.py)."""
