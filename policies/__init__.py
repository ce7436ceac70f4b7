"""Built-in scheduling policies (cost models) for firmament-py.

Each module is one policy, a pluggy plugin written only against `firmament_py.sdk` and
registered through the `firmament_py.policies` entry-point group like any third-party policy:
trivial, random, load-spreading, cpu-mem, quincy, network-aware. See `README.md` beside this
file for what each does.
"""
