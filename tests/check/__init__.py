"""Tests of ``sandbox check`` (a package, so they can read the docs with ``tests.readme_blocks``)."""
