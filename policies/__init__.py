"""Built-in scheduling policies (cost models) for firmament-py.

Policies are pluggy plugins registered through the ``firmament_py.policies`` entry-point
group; this package will hold the built-in ones (load-spreading, Quincy, network-aware,
NoMora, Zoe). It is empty until the policy SDK lands; see ``README.md`` beside this file.
"""
