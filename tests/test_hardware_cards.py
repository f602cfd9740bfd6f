"""The bundled hardware cards: real datasheet numbers (vendor datasheets), provenance and consistency."""

from pathlib import Path

import pytest

from roofline.cards.hardware import HardwareCard
from roofline.cards.store import CardStore

REPO = Path(__file__).resolve().parent.parent

GB, GiB, T = 1e9, 2.0**30, 1e12

REQUIRED = [
    "dgx-spark", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "a100-80g-sxm", "a100-80g-pcie", "a100-40g",
    "l40s", "rtx-6000-ada", "rtx-pro-6000", "rtx-5090", "rtx-4090", "rtx-3090", "rtx-3070", "mi300x",
    "apple-m1-max", "apple-m2-ultra", "apple-m3-max", "apple-m3-ultra", "apple-m4-max",
]


@pytest.fixture(scope="module")
def store() -> CardStore:
    return CardStore()


@pytest.fixture(scope="module")
def cards(store) -> list[HardwareCard]:
    return [c for c in store.all("hardware") if store.origin("hardware", c.name) == "bundled"]


def approx(x: float):
    return pytest.approx(x, rel=1e-6)


def test_required_cards_exist(store):
    for name in REQUIRED:
        assert store.hardware(name).name == name


# --- real numbers from the vendor datasheets -----------------------------------------------------------------------


def test_h100_sxm_matches_datasheet(store):
    c = store.hardware("h100-sxm")
    assert c.memory.capacity_bytes == 80 * GiB
    assert c.memory.bandwidth_bytes_per_s == approx(3.35e12)
    assert c.peak("bf16") == approx(989.4e12)
    assert c.peak("fp8") == approx(1978.9e12)
    assert c.interconnect.kind == "nvlink4"
    assert c.interconnect.bandwidth_bytes_per_s_per_direction == approx(450e9)
    assert c.interconnect.gpus_per_node == 8
    assert c.compute_units == 132
    assert "fp4" not in c.supported_dtypes


def test_h100_pcie_h200_b200_gb200(store):
    assert store.hardware("h100-pcie").memory.bandwidth_bytes_per_s == approx(2.0e12)
    assert store.hardware("h100-pcie").peak("bf16") == approx(756e12)
    h200 = store.hardware("h200")
    assert (h200.memory.capacity_bytes, h200.memory.bandwidth_bytes_per_s) == (141 * GiB, approx(4.8e12))
    b200 = store.hardware("b200")
    assert b200.memory.capacity_bytes == 180 * GiB
    assert b200.memory.bandwidth_bytes_per_s == approx(7.7e12)
    assert b200.peak("bf16") == approx(2250e12)
    assert b200.peak("fp4") == approx(9000e12)  # 18 PF with sparsity / 2
    assert b200.interconnect.bandwidth_bytes_per_s_per_direction == approx(900e9)
    gb200 = store.hardware("gb200")
    assert gb200.memory.capacity_bytes == 186 * GiB
    assert gb200.peak("bf16") == approx(2500e12)
    assert gb200.interconnect.gpus_per_node == 72


def test_a100_family(store):
    sxm = store.hardware("a100-80g-sxm")
    assert sxm.memory.bandwidth_bytes_per_s == approx(2039e9)
    assert sxm.peak("bf16") == approx(312e12)
    assert "fp8" not in sxm.supported_dtypes and "fp4" not in sxm.supported_dtypes  # Ampere has neither
    assert store.hardware("a100-80g-pcie").memory.bandwidth_bytes_per_s == approx(1935e9)
    a40 = store.hardware("a100-40g")
    assert (a40.memory.capacity_bytes, a40.memory.bandwidth_bytes_per_s) == (40 * GiB, approx(1555e9))


def test_geforce_uses_fp32_accumulate_rate(store):
    r5090 = store.hardware("rtx-5090")
    assert r5090.memory.bandwidth_bytes_per_s == approx(1.792e12)
    assert r5090.memory.capacity_bytes == 32 * GiB
    assert r5090.peak("bf16") == approx(209.5e12)  # not the 419 FP16-accumulate figure
    assert r5090.peak("fp4") == approx(1676e12)  # 3352 'AI TOPS' is sparse
    r4090 = store.hardware("rtx-4090")
    assert r4090.memory.bandwidth_bytes_per_s == approx(1008e9)
    assert r4090.peak("bf16") == approx(165.2e12)
    assert r4090.peak("fp8") == approx(330.3e12)
    for name in ("rtx-4090", "rtx-3090", "rtx-3070"):
        assert "fp4" not in store.hardware(name).supported_dtypes
    for name in ("rtx-3090", "rtx-3070"):
        assert "fp8" not in store.hardware(name).supported_dtypes


def test_l40s_mi300x(store):
    l40s = store.hardware("l40s")
    assert l40s.memory.bandwidth_bytes_per_s == approx(864e9)
    assert l40s.peak("bf16") == approx(362.05e12)
    mi = store.hardware("mi300x")
    assert mi.memory.capacity_bytes == 192 * GiB
    assert mi.memory.bandwidth_bytes_per_s == approx(5.3e12)
    assert mi.peak("bf16") == approx(1307.4e12)
    assert mi.peak("fp8") == approx(2614.9e12)
    assert mi.interconnect.kind == "infinity-fabric"


def test_dgx_spark(store):
    c = store.hardware("dgx-spark")
    assert c.memory.bandwidth_bytes_per_s == approx(273e9)
    assert c.memory.unified
    assert c.memory.capacity_bytes == 128 * GiB
    assert c.memory.usable_bytes == pytest.approx(119.7 * GiB)
    assert c.peak("fp4") == approx(500e12)  # 1 PFLOP sparse / 2


# --- unified-memory parts -------------------------------------------------------------------------------------


def test_apple_configurations(store):
    expect = {  # name: (RAM GiB, bandwidth GB/s, GPU cores) -- the configurations named in published_train.csv
        "apple-m1-max": (64, 400, 32),
        "apple-m2-ultra": (192, 800, 76),
        "apple-m3-max": (64, 400, 40),
        "apple-m4-max": (128, 546, 40),
        "apple-m3-ultra": (512, 819, 80),
    }
    for name, (ram, bw, cores) in expect.items():
        c = store.hardware(name)
        assert c.memory.unified and c.kind == "soc"
        assert c.memory.capacity_bytes == ram * GiB
        assert c.memory.bandwidth_bytes_per_s == approx(bw * GB)
        assert c.compute_units == cores
        # macOS lets the GPU wire ~75% of RAM on machines above 36 GB
        assert c.memory.usable_bytes == pytest.approx(0.75 * ram * GiB)
        assert "memory.reserved" in c.sources and "memory.reserved" in c.uncertain
        assert c.peak("fp16") == c.peak("fp32")
        assert "peak_flops.fp32" in c.uncertain  # Apple publishes no TFLOPS
    assert "bf16" not in store.hardware("apple-m1-max").supported_dtypes


def test_unified_flag_only_on_socs(cards):
    for c in cards:
        if c.memory.unified:
            assert c.kind == "soc" and c.memory.reserved_bytes > 0, c.name
        else:  # a discrete part's reserve is the driver's (firmware, ECC): under a tenth of it, and cited
            assert c.memory.reserved_bytes < c.memory.capacity_bytes / 10, c.name
            assert not c.memory.reserved_bytes or "memory.reserved" in c.sources, c.name


def test_memory_capacities_are_binary(cards):
    """DRAM is sold in binary sizes (JEDEC's GB of memory is 2^30 bytes): every card's capacity is a whole number
    of GiB, so an 80 GB H100 holds 85.9e9 bytes and nvidia-smi shows 81,559 MiB of it."""
    for c in cards:
        assert c.memory.capacity_binary, c.name
    h100 = next(c for c in cards if c.name == "h100-sxm").memory
    assert h100.usable_bytes == 81559 * 2**20


# --- resolution and aliases -----------------------------------------------------------------------------------


def test_published_rows_resolve(published_rows):
    rows = published_rows
    assert rows
    store = CardStore()
    for row in rows:
        assert store.hardware(row["hw_card"]).name == row["hw_card"], row["id"]


@pytest.mark.parametrize("alias, name", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("h100", "h100-sxm"), ("h100-sxm5", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA A100-SXM4-80GB", "a100-80g-sxm"),
    ("NVIDIA A100 80GB PCIe", "a100-80g-pcie"), ("NVIDIA A100-SXM4-40GB", "a100-40g"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("4090", "rtx-4090"), ("nvidia geforce rtx 5090", "rtx-5090"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ("AMD Instinct MI300X", "mi300x"), ("NVIDIA GB10", "dgx-spark"), ("Apple M2 Ultra", "apple-m2-ultra"),
    ("NVIDIA H200", "h200"), ("NVIDIA B200", "b200"), ("NVIDIA L40S", "l40s"),
    ("dgx-h100", "h100-sxm"), ("hgx-h100", "h100-sxm"), ("dgx-h200", "h200"), ("hgx-h200", "h200"), ("dgx-b200", "b200"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2-32g"), ("v100", "v100-sxm2-32g"), ("Tesla V100-SXM2-16GB", "v100-sxm2-16g"),
    ("Tesla V100-PCIE-16GB", "v100-pcie-16g"), ("Tesla V100-PCIE-32GB", "v100-pcie-32g"), ("Tesla T4", "t4"),
    ("NVIDIA A10", "a10"), ("NVIDIA RTX A6000", "rtx-a6000"), ("a6000", "rtx-a6000"), ("NVIDIA GeForce RTX 3060", "rtx-3060-12g"),
    ("NVIDIA GH200 480GB", "gh200"), ("AMD Instinct MI250X", "mi250x"), ("mi250x", "mi250x"),
    ("Radeon AI PRO R9700", "radeon-ai-pro-r9700"), ("Ryzen AI Max+ 395", "ryzen-ai-max-395"), ("strix halo", "ryzen-ai-max-395"),
    ("TPU v6e", "tpu-v6e"), ("Apple M1 Pro", "apple-m1-pro"), ("m1 pro", "apple-m1-pro"),
    ("AMD EPYC 9654 96-Core Processor", "epyc-9654"), ("Intel(R) Xeon(R) Platinum 8480+", "xeon-8480p"),
])
def test_device_names_resolve(store, alias, name):
    assert store.hardware(alias).name == name


# The cards for parts in public benchmark tables beyond the required ones: (what a user types or the driver prints,
# card, capacity in the vendor's unit, datasheet bandwidth GB/s, compute units)
MORE_CARDS = [
    ("NVIDIA GeForce RTX 4070", "rtx-4070", 12 * GiB, 504, 46),
    ("rtx 4070 super", "rtx-4070-super", 12 * GiB, 504, 56),
    ("NVIDIA GeForce RTX 4070 Ti", "rtx-4070-ti", 12 * GiB, 504, 60),
    ("4070 ti super", "rtx-4070-ti-super", 16 * GiB, 672, 66),
    ("NVIDIA GeForce RTX 4060", "rtx-4060", 8 * GiB, 272, 24),
    ("4060 ti 8gb", "rtx-4060-ti-8g", 8 * GiB, 288, 34),
    ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti-16g", 16 * GiB, 288, 34),
    ("NVIDIA GeForce RTX 3060 Ti", "rtx-3060-ti", 8 * GiB, 448, 38),
    ("NVIDIA GeForce RTX 3070 Ti", "rtx-3070-ti", 8 * GiB, 608, 48),
    ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti", 11 * GiB, 616, 68),
    ("NVIDIA GeForce RTX 5070", "rtx-5070", 12 * GiB, 672, 48),
    ("5060 ti 8gb", "rtx-5060-ti-8g", 8 * GiB, 448, 36),
    ("NVIDIA GeForce GTX 1080 Ti", "gtx-1080-ti", 11 * GiB, 484, 28),
    ("Tesla P40", "tesla-p40", 24 * GiB, 346, 30),
    ("Tesla P100-PCIE-16GB", "tesla-p100-16g", 16 * GiB, 732, 56),
    ("NVIDIA TITAN RTX", "titan-rtx", 24 * GiB, 672, 72),
    ("NVIDIA A40", "a40", 48 * GiB, 696, 84),
    ("NVIDIA RTX A4000", "rtx-a4000", 16 * GiB, 448, 48),
    ("NVIDIA L40", "l40", 48 * GiB, 864, 142),
    ("NVIDIA L20", "l20", 48 * GiB, 864, 92),
    ("NVIDIA RTX 4000 Ada Generation", "rtx-4000-ada", 20 * GiB, 360, 48),
    ("NVIDIA H100 NVL", "h100-nvl", 94 * GiB, 3900, 132),
    ("NVIDIA H800", "h800", 80 * GiB, 3350, 132),
    ("NVIDIA B100", "b100", 192 * GiB, 8000, None),
    ("jetson orin nano super", "jetson-orin-nano-super", 8 * GiB, 102, 8),
    ("AMD Radeon RX 7900 XT", "radeon-rx-7900-xt", 20 * GiB, 800, 84),
    ("7900 xtx", "radeon-rx-7900-xtx", 24 * GiB, 960, 96),
    ("AMD Radeon RX 7900 GRE", "radeon-rx-7900-gre", 16 * GiB, 576, 80),
    ("AMD Radeon RX 7800 XT", "radeon-rx-7800-xt", 16 * GiB, 624, 60),
    ("AMD Radeon RX 7700 XT", "radeon-rx-7700-xt", 12 * GiB, 432, 54),
    ("AMD Radeon RX 7600 XT", "radeon-rx-7600-xt", 16 * GiB, 288, 32),
    ("AMD Radeon RX 6900 XT", "radeon-rx-6900-xt", 16 * GiB, 512, 80),
    ("AMD Radeon RX 6800 XT", "radeon-rx-6800-xt", 16 * GiB, 512, 72),
    ("AMD Radeon RX 6700 XT", "radeon-rx-6700-xt", 12 * GiB, 384, 40),
    ("AMD Radeon RX 9070 XT", "radeon-rx-9070-xt", 16 * GiB, 640, 64),
    ("AMD Radeon RX 9070", "radeon-rx-9070", 16 * GiB, 640, 56),
    ("AMD Radeon PRO W7900", "radeon-pro-w7900", 48 * GiB, 864, 96),
    ("AMD Instinct MI50", "mi50", 32 * GiB, 1024, 60),
    ("AMD Instinct MI300A", "mi300a", 128 * GiB, 5300, 228),
    ("AMD Radeon 780M Graphics", "radeon-780m", 64 * GiB, 89.6, 12),
    ("AMD Radeon 890M Graphics", "radeon-890m", 32 * GiB, 120, 16),
    ("Intel(R) Arc(TM) A750 Graphics", "arc-a750", 8 * GiB, 512, 28),
    ("Intel(R) Arc(TM) A580 Graphics", "arc-a580", 8 * GiB, 512, 24),
    ("Intel(R) Arc(TM) B570 Graphics", "arc-b570", 10 * GiB, 380, 18),
    ("Intel(R) Arc(TM) Pro B60 Graphics", "arc-pro-b60", 24 * GiB, 456, 20),
    ("Intel Arc 140V", "arc-140v", 32 * GiB, 136.5, 8),
    ("Intel Gaudi 2", "gaudi2", 96 * GiB, 2450, 24),
    ("Apple M1 Pro 14-core GPU", "apple-m1-pro-14c", 32 * GiB, 200, 14),
    ("m1 max 24-core", "apple-m1-max-24c", 64 * GiB, 400, 24),
    ("M1 Ultra 48-core", "apple-m1-ultra-48c", 128 * GiB, 800, 48),
    ("M2 Pro 16-core", "apple-m2-pro-16c", 32 * GiB, 200, 16),
    ("Apple M2 Max 30-core GPU", "apple-m2-max-30c", 96 * GiB, 400, 30),
    ("M2 Ultra 60-core", "apple-m2-ultra-60c", 192 * GiB, 800, 60),
    ("m3 pro 14c", "apple-m3-pro-14c", 36 * GiB, 150, 14),
    ("M3 Max 30-core", "apple-m3-max-30c", 96 * GiB, 300, 30),
    ("M3 Ultra 60-core", "apple-m3-ultra-60c", 256 * GiB, 819, 60),
    ("M4 Pro 16-core", "apple-m4-pro-16c", 64 * GiB, 273, 16),
    ("Apple M4 Max 32-core GPU", "apple-m4-max-32c", 36 * GiB, 410, 32),
    ("M3 Max", "apple-m3-max", 64 * GiB, 400, 40),  # the top configurations keep their plain names
    ("apple m4 max 40-core gpu", "apple-m4-max", 128 * GiB, 546, 40),
]


@pytest.mark.parametrize("alias, name, capacity_bytes, bandwidth_gb_s, units", MORE_CARDS)
def test_more_cards_resolve_with_their_datasheet_figures(store, alias, name, capacity_bytes, bandwidth_gb_s, units):
    card = store.hardware(alias)
    assert card.name == name
    assert card.memory.capacity_bytes == approx(capacity_bytes)
    assert card.memory.bandwidth_bytes_per_s == approx(bandwidth_gb_s * GB)
    assert card.compute_units == units


def test_binned_apple_parts_keep_the_top_part_s_generation_rate(store):
    """A binned Apple GPU runs the same ALUs at the same clock as its generation's top part: its fp32 peak is the top
    card's in proportion to the cores (within the 1% the sources round to)."""
    for binned, top in (("apple-m1-max-24c", "apple-m1-max"), ("apple-m2-max-30c", "apple-m2-max"),
                        ("apple-m3-max-30c", "apple-m3-max"), ("apple-m4-max-32c", "apple-m4-max"),
                        ("apple-m2-ultra-60c", "apple-m2-ultra"), ("apple-m3-ultra-60c", "apple-m3-ultra")):
        b, t = store.hardware(binned), store.hardware(top)
        per_core = (b.peak("fp32") / b.compute_units) / (t.peak("fp32") / t.compute_units)
        assert per_core == pytest.approx(1.0, rel=0.01), binned
        assert b.supported_dtypes == t.supported_dtypes, binned


def test_aliases_unique(cards):
    owner: dict[str, str] = {}
    for c in cards:
        for key in {c.name.lower(), *(a.lower() for a in c.aliases)}:
            assert key not in owner, f"'{key}' is claimed by both {owner[key]} and {c.name}"
            owner[key] = c.name


# --- provenance and sanity ------------------------------------------------------------------------------------


def test_every_figure_has_a_source(cards):
    for c in cards:
        assert "memory.capacity" in c.sources, c.name
        assert "memory.bandwidth" in c.sources, c.name
        for dtype in c.supported_dtypes:
            assert f"peak_flops.{dtype}" in c.sources, f"{c.name}: no source for peak_flops.{dtype}"
        for field in ("compute_units", "compute_capability", "l2_cache_bytes", "power_watts", "price_usd",
                      "cloud_usd_per_gpu_hour"):
            if getattr(c, field) is not None:
                key = field.removesuffix("_bytes").removesuffix("_watts")
                assert key in c.sources, f"{c.name}: {key} has no source"
        for key in c.uncertain:
            assert c.uncertain[key].strip(), f"{c.name}: empty uncertain note for {key}"


def test_no_sparse_figure_stored_as_dense(cards):
    for c in cards:
        p = c.peak_flops.as_dict()
        for half in ("fp16", "bf16"):
            if half in p and "fp8" in p:
                assert p[half] <= p["fp8"], f"{c.name}: {half} exceeds fp8"
        if "fp8" in p and "fp4" in p:
            assert p["fp8"] <= p["fp4"], c.name
        if "tf32" in p and "bf16" in p:
            assert p["tf32"] <= p["bf16"], c.name
        for dtype, v in p.items():
            assert v > 0
            assert v < 16e15, f"{c.name}: {dtype} {v:.3g} exceeds any dense single-GPU figure"  # GB300 dense FP4 is 15 PF


def test_discrete_interconnects(cards):
    for c in cards:
        ic = c.interconnect
        # nvlink2/pcie3: Volta and Turing; ici: TPU inter-chip interconnect; roce: Gaudi's on-chip RoCE ports
        assert ic.kind in {"nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie3", "pcie4", "pcie5", "infinity-fabric", "ici", "roce",
                           "none"}, c.name
        if ic.kind != "none":
            assert ic.bandwidth_bytes_per_s_per_direction > 0 and ic.latency_s > 0, c.name
        if ic.kind.startswith("pcie"):
            assert ic.bandwidth_bytes_per_s_per_direction <= 64e9, c.name
        if c.kind == "soc" and c.vendor == "apple":
            assert ic.kind == "none" and ic.gpus_per_node == 1


def test_description_is_one_line(cards):
    for c in cards:
        assert c.description and "\n" not in c.description, c.name


def test_the_readme_example_card_loads(tmp_path):
    """The card a newcomer copies from the README's 'Adding a card' loads as written, its optional price included."""
    text = (REPO / "README.md").read_text()
    start = text.index("name: my-gpu")
    folder = tmp_path / "hardware"
    folder.mkdir()
    (folder / "my-gpu.yaml").write_text(text[start:text.index("```", start)])
    card = CardStore(extra_dirs=[tmp_path]).hardware("my-gpu")
    assert card.memory.bandwidth_bytes_per_s == 1008e9 and card.cloud_usd_per_gpu_hour == 1.10
