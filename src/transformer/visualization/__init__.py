"""Pictures: attention maps, positional encodings, training curves."""
