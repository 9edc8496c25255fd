"""Plumbing shared by every stage: process pools, atomic writes, progress, input checks, UTF-8.

Private: nothing here is part of the public API.
"""
