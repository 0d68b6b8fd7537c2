"""Calibration on a real engine: measure acceptance and step time, fit the planner's parameters, compare
predicted with measured.

Data flows one way, one floor above the other (tests/test_architecture.py): fitting/ (fits of shipped
parameters to published data) -> storage/ (the store, records, kept uploads, calibrated profiles) -> harness/ (engine
settings and checks, child processes, the protocol, metrics) -> targets/ (registry, catalogue, model assets, heads)
-> measure/ (spec, engine, serve, microbench: measure only) -> run/ (jobs, runners, admission, progress) ->
analysis/ (fit, predict, report) -> the calibrated profile -> the planner and the app. The measuring modules import
neither jobs nor runners.

    python -m calibration microbench                      # torch step-time grid on this machine
    python -m calibration run --configs baseline,ngram:2,ngram:4,draft_model:smollm2-135m-2l:2 \\
        --workloads code,chat                             # one engine start per configuration
    python -m calibration serve --config ngram:3          # vllm serve + load at several concurrencies
    python -m calibration fit --save-profile cpu-mine     # acceptance + step fit, predicted vs measured
    python -m calibration import --bench-json result.json --workload code --method eagle3
    python -m calibration import --prometheus http://host:8000/metrics --interval-s 60 --workload chat
    python -m calibration regress                         # nightly: exit 1 on an acceptance drop
    python -m calibration list runs|fits|profiles|history|registry

Models, methods (ngram, draft_model, eagle3, p_eagle, medusa, mtp) and drafts come from the calibration
registry (registry.py, an admin-owned YAML file). Jobs heartbeat and enforce their own deadline; a dead
job is marked failed by the next reader; the store URL travels on stdin, never on a command line.

torch and vllm are imported only inside the functions that need them.
"""
