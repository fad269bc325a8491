"""What tests share besides fixtures: fakes, sample data, fake servers and ways to run `quorum`.

Fixtures live in conftest files (tests/conftest.py for both suites, tests/unit/ and
tests/integration/ for their own); test modules import the classes and helpers from here.
"""
