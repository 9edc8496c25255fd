"""streambpe: byte-level BPE tokenizers, trained and applied in streams."""
