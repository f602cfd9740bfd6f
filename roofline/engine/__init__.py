"""Source-checkout shim for `roofline.engine`.

The micro-engine's code lives in the repository's top-level `engine/` folder; the wheel installs that folder as
`roofline/engine/` and leaves this file out. In a checkout (editable install, or PYTHONPATH=.) this package points
its search path at that folder and runs its `__init__`, so `import roofline.engine.X` behaves the same both ways.
"""

from pathlib import Path as _Path

_SOURCE = _Path(__file__).resolve().parent.parent.parent / "engine"
__path__ = [str(_SOURCE)]
__file__ = str(_SOURCE / "__init__.py")
exec(compile((_SOURCE / "__init__.py").read_text(), __file__, "exec"))
