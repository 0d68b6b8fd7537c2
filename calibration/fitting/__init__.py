"""The fits of the project's parameters, on one bounded least squares and one FitResult (core.py):
steptime.py (kernel step-time terms, pinned aiconfigurator data), speculation.py (speculation overheads, the
published table), trees.py (the tree sibling model). tools/fit_*.py are their command lines."""
