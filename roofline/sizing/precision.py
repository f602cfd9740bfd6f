"""Which format each component's weights are stored in and which math dtype it runs in, for one deployment."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cards.formats import kv_format, math_dtype, weight_format
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.sizing.params import bytes_per_param, component_format


@dataclass(frozen=True)
class Formats:
    """Resolved formats for one (model, hardware, quant, kv_quant)."""

    card: ModelCard
    hw: HardwareCard
    quant: str | None
    kv_quant: str

    def wbytes(self, component: str) -> float:
        """Stored bytes per parameter (an imported file's exact bytes where the card has them)."""
        return bytes_per_param(self.card, component, self._quant)

    @property
    def _quant(self) -> str | None:
        """A bare --quant naming one of the card's own formats means the checkpoint as shipped (gpt-oss 'mxfp4':
        MXFP4 experts, bf16 rest); 'default=FORMAT' forces it everywhere."""
        return None if self.quant in set(self.card.weights.values()) else self.quant

    def component_format(self, component: str) -> str:
        return component_format(self.card, component, self._quant)

    @property
    def weights_label(self) -> str:
        """The weight formats as run: the --quant given, else the checkpoint's layout ('bf16+fp8'), marked as
        shipped where --quant named one of its formats (DeepSeek-V3 `--quant bf16` is its FP8 checkpoint)."""
        if self._quant is not None:
            return self.quant
        shipped = "+".join(dict.fromkeys(self.card.weights.values()))
        return shipped if self.quant in (None, shipped) else f"{shipped} (as shipped)"

    def dtype(self, component: str) -> str:
        return math_dtype(weight_format(self.component_format(component)), self.hw.supported_dtypes)

    @property
    def act_dtype(self) -> str:
        return math_dtype(weight_format("bf16"), self.hw.supported_dtypes)

    @property
    def act_bytes(self) -> float:
        return 4.0 if self.act_dtype == "fp32" else 2.0

    @property
    def kv_bytes(self) -> float:
        return kv_format(self.kv_quant).bytes_per_value
