"""Thin click commands over the library; rendering only."""
