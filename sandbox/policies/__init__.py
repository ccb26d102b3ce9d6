"""Policies in functional form over population parameters."""
