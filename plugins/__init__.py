"""Integrations of firmament-py with the outside world.

This package will hold the drivers that embed the scheduling core: the ZeroMQ + msgpack
daemon and adapters for external cluster managers. It is empty until those land; see
``README.md`` beside this file.
"""
