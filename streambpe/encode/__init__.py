"""Encoding: :class:`~streambpe.encode.encoder.Encoder` turns text into ids and back.

It applies the special-token policy and hands ordinary text to the active
backend's kernels (:mod:`streambpe.core`).
"""
