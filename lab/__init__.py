"""The lab: what measures quorum rather than answers with it, under one roof.

- `bench/`: the benches (`quorum bench …`), each timing or straining one part of quorum.
- `trials/`: the methods' trials (`quorum eval organize`, `ensemble`, `methods`, `likelihoods`):
  each paper's method against its controls and ablations, on its datasets.
- `simulate/`: the simulated OpenAI-compatible endpoint and its planted reader (a test harness,
  never a client).
- `elasticsearch_server.py` (+ `elasticsearch_dist.py`, `java_runtime.py`): an Elasticsearch node
  and its JDK, provisioned for tests and benches (`python -m lab.elasticsearch_server start`).
- `cli/`: the lab's commands, which graphs/cli registers by module name.

The lab stands above the product (it may import graphs, nodes and infra); nothing in the product
imports it (tests/unit/test_layout.py), and its own dependencies are the `lab` extra.
"""
