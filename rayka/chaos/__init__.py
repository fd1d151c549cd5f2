"""rayka chaos suite: fault injection, recorded histories and the invariant checker (DESIGN §7)."""
