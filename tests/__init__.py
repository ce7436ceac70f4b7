"""Test suite of firmament_py."""
