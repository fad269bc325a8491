"""The benches: `quorum bench …`.

Each times or strains one part of quorum and writes its figures (docs/measured.md names the
command under each).
"""
