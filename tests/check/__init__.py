"""Tests of ``sandbox check`` (a package: tests/test_docs.py and tests/check/test_docs.py share a file name)."""
