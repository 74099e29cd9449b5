"""Adapters that give every peer and raw floor the same small interface (see ``base.py``)."""
