"""The analytic model (numpy/scipy only), one floor above the other; an import never runs up a floor
(tests/test_architecture.py):

- types.py: the records of models, GPUs, methods, acceptance and efficiency
- physics/: the time of one verifier step on one replica (roofline, networks, serving, replica, engines, deploy flags)
- request.py, answer.py, context.py, formatting.py, price.py, fleet.py: the spine: what goes in (PlanRequest), what
  comes out (Plan, PlanFleet), the built context, the one serialiser, the one price rule, the fleet-by-hour record
- acceptance/: acceptance rates and their conversions, tiers, the measured library, token trees
- search/: operating points: candidates, drafting cost, memory, the K x batch search, what-if sweeps
- money/: fleet sizing per hour, bills, spend, economics, K per hour
- uncertainty/: the Monte Carlo, the tornado, risk, payback draws
- decision/: the verdict, levers, the hardware choice, the assumptions shown
- plan.py: plan(PlanRequest) -> Plan, the one answer every page, the report and the CLI print
- checks/: what re-runs the plan: the seed article's claims, the SLO knee

`python -m planner` runs the command line (cli/)."""
