"""Tests of the model adapters."""
