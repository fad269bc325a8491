"""The lab: what measures quorum rather than answers with it.

Benches (`bench/`) and the method evaluations (`eval/`: the methods against their controls, the
likelihood probes, CORG and the ensemble on their datasets) run the product and score it; nothing
in the product imports them (tests/unit/test_layout.py), and their own dependencies are the `lab`
extra.
"""
