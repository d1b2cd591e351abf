"""Environment B with the three planted changes at once (one interpreter start for the tests)."""
import importlib.util
import sys
from pathlib import Path

for _name in ("plant_lowering", "plant_kernel", "plant_graph"):
    _spec = importlib.util.spec_from_file_location(f"_env_{_name}", Path(__file__).with_name(f"{_name}.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _module  # Dynamo imports the module of a function it inlines
    _spec.loader.exec_module(_module)
