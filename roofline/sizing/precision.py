"""Which format each component's weights are stored in and which math dtype it runs in, for one deployment."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.cards.formats import kv_format, math_dtype, weight_format
from roofline.cards.hardware import HardwareCard
from roofline.cards.model import ModelCard
from roofline.sizing.params import component_format


@dataclass(frozen=True)
class Formats:
    """Resolved formats for one (model, hardware, quant, kv_quant)."""

    card: ModelCard
    hw: HardwareCard
    quant: str | None
    kv_quant: str

    def wbytes(self, component: str) -> float:
        return weight_format(self.component_format(component)).bytes_per_value

    def component_format(self, component: str) -> str:
        """A bare --quant naming one of the card's own formats means the checkpoint as shipped (gpt-oss 'mxfp4':
        MXFP4 experts, bf16 rest); 'default=FORMAT' forces it everywhere."""
        native = set(self.card.weights.values())
        return component_format(self.card, component, None if self.quant in native else self.quant)

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
