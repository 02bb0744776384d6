"""The lab: what trains, measures and deploys raqa, apart from what the page runs (raqa/).

`python -m lab VERB ...` (lab/cli): training (training/), the experiments and evaluations (evaluation/), benchmarks,
load and soak tests, docs rendering and deploy (ops/). The lab imports raqa; raqa never imports the lab
(tests/test_architecture.py holds that wall), so a Space ships raqa/ and the committed results only.
"""
