"""One measurement: its frozen spec (spec.py), the offline engine run (engine.py), the serving path (serve.py)
and the step-time microbenchmark (microbench.py)."""
