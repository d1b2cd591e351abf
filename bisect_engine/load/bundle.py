"""The environment bundle (``bisect-accuracy record``): what one environment computed, readable by another.

A bundle is a folder of two files, both readable without unpickling code:

``manifest.json``
    ``format`` ("bisect-accuracy-bundle"), ``format_version`` (:data:`FORMAT_VERSION`; a reader
    refuses a newer one), ``model`` (path, name, sha256 of the model file; a plain script's also
    ``kind`` "script", ``argv`` and ``cwd``: ``compare`` runs it again), ``environment``
    (torch, triton, cuda, device, cpu capability, python, TF32 flags, the Inductor config),
    ``settings`` (the value cap, the compile settings the model file gave; a script's
    ``script_compile_options`` per graph and ``graphs_not_recorded``), ``graphs`` (per
    captured aten graph: ``name``, ``kind``, ``code`` (the graph's Python source,
    ``GraphModule.code``), ``placeholders``, ``constants`` (its ``get_attr`` tensors; absent in
    bundles written before them) and ``nodes``: per compute node its ``name``, ``op``,
    ``inputs`` (names of the values it reads) and ``values`` (per tensor it makes: ``name``,
    ``meta`` {shape, dtype}, ``stored`` (whether its values are in values.pt) and ``digest`` per
    side)), ``model_outputs`` (keys into values.pt).
``values.pt``
    ``torch.save`` of a flat ``dict[str, Tensor]``, loaded with ``weights_only=True``. Keys:
    ``GRAPH/VALUE/input`` (a placeholder's real input), ``GRAPH/VALUE/constant``, ``GRAPH/VALUE/eager``, ``/fp64`` (the op run
    in fp64 on the eager values of its inputs), ``/compiled`` (the op compiled alone by Inductor on
    the same inputs), ``model/outN``. A tensor with more elements than the cap is kept as a digest only.

The graphs are re-captured from the model file (or the script, run again) in the other environment and aligned to these
records by structure (:mod:`bisect_engine.localise.environments`); the source text says what the
recorded graph was when they differ.
"""
from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

FORMAT = "bisect-accuracy-bundle"
FORMAT_VERSION = 1
MANIFEST, VALUES = "manifest.json", "values.pt"
DEFAULT_VALUE_CAP = 1_000_000  # elements per tensor kept as values; beyond: a digest


@dataclass(frozen=True)
class Bundle:
    """A bundle as read: its manifest and its tensors."""

    path: Path
    manifest: dict[str, Any]
    values: dict[str, Any]

    @property
    def graphs(self) -> list[dict[str, Any]]:
        return self.manifest["graphs"]

    @property
    def environment(self) -> dict[str, Any]:
        return self.manifest["environment"]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def bundle_files(manifest: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The bundle's files as (name, bytes), values first: the manifest, written last, marks it whole.
    The caller writes them through the output folder (locked, atomic, never through a link)."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu().contiguous() for k, v in values.items()}, buffer)
    body = {"format": FORMAT, "format_version": FORMAT_VERSION, **manifest}
    return [(VALUES, buffer.getvalue()), (MANIFEST, json.dumps(body, indent=1, sort_keys=False, default=str).encode())]


def read_bundle(path: Path) -> Bundle:
    """The bundle at ``path``; a :class:`UsageError` with one line for anything unreadable."""
    path = Path(path)
    manifest_path = path / MANIFEST if path.is_dir() else path
    folder = manifest_path.parent
    if not manifest_path.is_file():
        raise UsageError(f"no bundle at {path} (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(f"{manifest_path} is not a bundle manifest (truncated or not JSON: {error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UsageError(f"{manifest_path} is not a bisect-accuracy bundle")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UsageError(f"{path} has bundle format {version!r}; this bisect-accuracy reads up to "
                         f"{FORMAT_VERSION}: upgrade bisect-accuracy")
    if not all(key in manifest for key in ("graphs", "environment", "model")):
        raise UsageError(f"{manifest_path} lacks graphs, environment or model: truncated?")
    return Bundle(folder, manifest, _load_values(folder / VALUES))


def _load_values(path: Path) -> dict[str, Any]:
    import torch

    if not path.is_file():
        raise UsageError(f"the bundle has no {path.name} (missing file)")
    try:
        values = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # truncated zip, pickled code refused by weights_only, ...
        raise UsageError(f"{path} cannot be read ({type(error).__name__}: {str(error).splitlines()[0][:120]})") from None
    if not isinstance(values, dict):
        raise UsageError(f"{path} is not a dict of tensors")
    return values


def environment_facts(device: str = "cpu") -> dict[str, Any]:
    """What the result of an op may depend on, as plain JSON values."""
    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__, "triton": _version("triton"), "cuda": torch.version.cuda,
        "python": platform.python_version(), "machine": platform.machine(), "device": device,
        "cpu_capability": _safe(lambda: torch.backends.cpu.get_cpu_capability()),
        "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "threads": torch.get_num_threads(),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        facts["device_name"] = torch.cuda.get_device_name()
        facts["driver"] = _safe(lambda: torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else None
    facts["inductor_config"] = inductor_config_facts()
    return facts


def inductor_config_facts() -> dict[str, Any]:
    """Inductor's config as plain values (callables and objects left out)."""
    import torch._inductor.config as config

    plain = (bool, int, float, str, type(None))
    copy = config.get_config_copy()
    return {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(copy.items()) if isinstance(v, plain)
            or isinstance(v, (list, tuple)) and all(isinstance(x, plain) for x in v)}


def environment_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per fact that differs ("torch: 2.13.0 -> 2.14.1"); config keys one by one."""
    lines = [f"{key}: {recorded.get(key)} -> {current.get(key)}" for key in sorted(set(recorded) | set(current))
             if key != "inductor_config" and recorded.get(key) != current.get(key)]
    old, new = recorded.get("inductor_config", {}), current.get("inductor_config", {})
    lines += [f"inductor_config.{key}: {old.get(key)} -> {new.get(key)}"
              for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key) and key in old and key in new]
    return lines


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _safe(call: Any) -> Any:
    try:
        return call()
    except Exception:
        return None
