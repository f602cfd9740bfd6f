"""A card whose kernels are another kind's (`efficiency_kind`): the MI300A is a unified-memory APU (kind soc) whose
GPU is the MI300X's CDNA 3, so it takes the discrete-GPU defaults and a runtime's amd-gpu values, not the DGX Spark's
soc defaults and Strix Halo's amd-soc ones; its memory stays the APU's (unified, the OS's share reserved)."""

from __future__ import annotations

import json

import pytest
import yaml
from hostile import cli, ok, refused, write_card

from roofline.cards.store import CardStore, bundled_dir
from roofline.perf.efficiency import expected_efficiency, scopes


def _step_s(capsys, hw: str, batch: int) -> float:
    out = ok(cli(capsys, "predict", "-m", "qwen3-30b-a3b", "--hw", hw, "--runtime", "llama.cpp", "--quant", "q4_k_m",
                 "--batch", batch, "--json"))
    return json.loads(out)["itl_s"]


def test_the_mi300a_is_scoped_as_an_amd_gpu():
    st = CardStore()
    mi300a, mi300x = st.hardware("mi300a"), st.hardware("mi300x")
    assert mi300a.kind == "soc" and mi300a.memory.unified
    assert scopes(mi300a) == scopes(mi300x) == ["default", "gpu", "amd", "amd-gpu"]
    runtime = st.runtime("llama.cpp")
    assert expected_efficiency(mi300a, runtime).expert_gemm_overhead_s == \
        expected_efficiency(mi300x, runtime).expert_gemm_overhead_s


@pytest.mark.parametrize("batch", [1, 9])
def test_a_mi300a_decode_step_costs_what_a_mi300x_one_does(capsys, batch):
    # same CUs per XCD, same HBM3 rate: within the 228/304 CU ratio of each other, not Strix Halo's 100 us per expert
    assert _step_s(capsys, "mi300a", batch) == pytest.approx(_step_s(capsys, "mi300x", batch), rel=0.35)


def test_an_efficiency_kind_needs_a_source(tmp_path, capsys):
    card = yaml.safe_load((bundled_dir() / "hardware" / "mi300a.yaml").read_text())
    card["sources"].pop("efficiency_kind")
    write_card(tmp_path, "hardware", card)
    refused(cli(capsys, "predict", "-m", "llama-3.1-8b", "--hw", "mi300a", "--cards", tmp_path), "efficiency_kind")
