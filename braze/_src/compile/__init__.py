"""mx.compile: trace (trace.py) -> Tape (tape.py) -> simplify.py -> fuse.py -> replay.py.

See docs/architecture.md and docs/compile.md.
"""
