"""`python -m graphs.cli`: the `quorum` command line (what batch drills start as a subprocess)."""

from graphs.cli import main

main()
