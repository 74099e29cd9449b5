"""Benchmarks of django-simba side by side with its peers and each server's raw floor.

Run ``python -m benchmarks.run --help``; see ``benchmarks/README.rst``.
"""
