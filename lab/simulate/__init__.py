"""A simulated OpenAI-compatible endpoint, and a reader with planted biases behind it.

- `server.py`: `SimulatedEndpoint`, a real HTTP server (chat completions, completions with
  echoed log-probabilities, models), with injected faults (`faults.py`).
- `planted.py`: the plant format — per question its gold answer, per passage (by the id shown
  after "PMID") its role, answer and utility; CORG relations follow from them.
- `reader.py`: the position-biased reader — weights utility × position curve, one seeded
  greedy reading per prompt, log-probabilities from the same weights (with a saturating
  interaction term and per-prompt noise).
- `bias.py`: `ReaderSettings` and the position curves; `calibration.py`: the published
  measurements of real models its defaults come from (Lost in the Middle's curve,
  self-consistency's agreement, citation precision, CCV's valid quotes).
- `sampling.py`: where a reading departs from the greedy one — sampled calls (temperature
  > 0), citing another passage, misquoting.
- `replies.py`: what each prompt kind gets back (member, cited member, synthesis, group,
  relation, duplicates, plural question).
- `verify.py`: the verifier's prompt answered by a simple word rule, with or without plants (a
  wiring harness: the verifier's calls go through, nothing is shown about its judgement).
- `python -m lab.simulate --planted FILE …` serves it from the command line.

A run records the reader it met: `GET <base_url>/reader` returns the settings and the plants'
digest; every reply also carries them, as compact JSON, in the `x-quorum-reader` header and
the `system_fingerprint` field (LangChain: `AIMessage.response_metadata["system_fingerprint"]`).
"""
