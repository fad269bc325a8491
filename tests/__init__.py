"""quorum's tests; a package so that `tests.support` imports the same way from every suite."""
