"""Server dialects, one module each; the protocol and the registry are in ``base``."""
