"""The teacher of a run: every kind behind one constructor (docs/architecture.md)."""
