"""Encoding at scale: files to ``.bin`` ids, batches of texts, and async streams.

Every function here takes an :class:`~streambpe.encode.encoder.Encoder`; the
public :class:`~streambpe.tokenizer.Tokenizer` offers them as methods.
"""
