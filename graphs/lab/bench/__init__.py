"""The benches: `quorum bench …`, each timing or straining one part of quorum and writing its
figures (docs/measured.md names the command under each).
"""
