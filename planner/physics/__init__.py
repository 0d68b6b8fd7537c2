"""The time of one verifier step on one replica: the roofline terms per operation (roofline.py) over the
network a method runs (networks.py), speculation's step time and throughput (serving.py), one replica under the SLO
(replica.py), which fitted step-time terms apply to a model (step_scope.py) or are borrowed (borrowed.py), each
serving engine's own terms (engines.py), the engine flags a deployment carries (deploy.py), and the time to first
token of one replica (ttft.py)."""
