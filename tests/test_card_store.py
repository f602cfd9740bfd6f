from pathlib import Path

import pytest
import yaml

from roofline.cards.hardware import HardwareCard
from roofline.cards.model import expand_pattern
from roofline.cards.store import CardStore, bundled_dir, name_key, names_of
from roofline.errors import CardError, UnknownNameError

SPARK = bundled_dir() / "hardware" / "dgx-spark.yaml"


def spark_data() -> dict:
    return yaml.safe_load(SPARK.read_text())


def write_card(root: Path, kind: str, data: dict, stem: str | None = None) -> Path:
    path = root / kind / f"{stem or data['name']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def test_spark_parses_into_si():
    card = CardStore().hardware("DGX-Spark")
    assert card.memory.bandwidth_bytes_per_s == 273e9
    assert card.memory.capacity_bytes == 128 * 2**30
    assert card.memory.unified
    assert card.memory.usable_bytes == pytest.approx(119.7 * 2**30)


@pytest.mark.parametrize("spelling", ["dgx-spark", "DGX-SPARK", "gb10", "NVIDIA GB10", " spark "])
def test_names_and_aliases_case_insensitive(spelling):
    assert CardStore().hardware(spelling).name == "dgx-spark"


@pytest.mark.parametrize("spelling,card", [
    ("NVIDIA H100", "h100-sxm"), ("nvidia-h100", "h100-sxm"), ("H100 SXM5 80GB", "h100-sxm"),
    ("H100 NVL", "h100-nvl"), ("H100 PCIe 80GB", "h100-pcie"), ("Mac Studio M2 Ultra", "apple-m2-ultra"),
])
def test_a_datasheet_name_holding_one_cards_alias_names_that_card(spelling, card):
    """The alias with most tokens wins ('H100 NVL' is not the SXM card); an alias must hold a number."""
    assert CardStore().hardware(spelling).name == card


@pytest.mark.parametrize("spelling", ["nvidia", "AMD", "xeon", "h1000"])
def test_a_vendor_or_family_word_alone_names_no_card(spelling):
    with pytest.raises(UnknownNameError):
        CardStore().hardware(spelling)


def test_unknown_name_suggests_closest():
    with pytest.raises(UnknownNameError, match="did you mean dgx-spark"):
        CardStore().hardware("dgx-sprak")


def test_user_dir_overrides_bundled(isolated_home):
    data = spark_data()
    data["memory"]["bandwidth"] = "300 GB/s"
    write_card(isolated_home, "hardware", data)
    store = CardStore()
    assert store.hardware("dgx-spark").memory.bandwidth_bytes_per_s == 300e9
    assert store.origin("hardware", "dgx-spark") == "user"


def test_cards_option_overrides_user_dir(isolated_home, tmp_path):
    data = spark_data()
    data["memory"]["bandwidth"] = "300 GB/s"
    write_card(isolated_home, "hardware", data)
    data["memory"]["bandwidth"] = "301 GB/s"
    extra = tmp_path / "extra"
    write_card(extra, "hardware", data)
    assert CardStore([extra]).hardware("spark").memory.bandwidth_bytes_per_s == 301e9


def test_card_given_as_path(tmp_path):
    data = spark_data() | {"name": "my-box", "aliases": []}
    path = write_card(tmp_path, "hardware", data)
    assert CardStore().hardware(str(path)).name == "my-box"


BAD_CARDS = [
    (lambda d: d["memory"].update(bandwidth="273 GX/s"), "memory.bandwidth", "quantity like '273 GB/s'"),
    (lambda d: d["memory"].pop("capacity"), "memory.capacity", "required field is missing"),
    (lambda d: d["peak_flops"].update(bf16="lots"), "peak_flops.bf16", "TFLOP/s"),
    (lambda d: d.update(kind="gpu-ish"), "kind", "'gpu', 'soc', 'cpu' or 'accelerator'"),
    (lambda d: d.update(colour="green"), "colour", "unknown field"),
    (lambda d: d["peak_flops"].update(fp6="1 TFLOP/s"), "peak_flops.fp6", "unknown field"),
    (lambda d: d.update(sources={}), "card", "sources must say where 'memory.capacity' comes from"),
    (lambda d: d["memory"].update(reserved="200 GiB"), "memory", "reserved must be smaller than capacity"),
]


@pytest.mark.parametrize("mutate, field, message", BAD_CARDS)
def test_bad_hardware_card_names_file_field_and_form(tmp_path, mutate, field, message):
    data = spark_data()
    mutate(data)
    path = write_card(tmp_path, "hardware", data)
    with pytest.raises(CardError) as err:
        CardStore([tmp_path]).hardware("dgx-spark")
    text = str(err.value)
    assert str(path) in text and f": {field}: " in text and message in text
    assert "\n" not in text


def test_not_yaml_and_wrong_name(tmp_path):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(CardError, match="broken.yaml: line 2: not valid YAML"):
        CardStore([tmp_path]).hardware("broken")
    write_card(tmp_path, "hardware", spark_data(), stem="other")
    with pytest.raises(CardError, match="must match the file name 'other'"):
        CardStore([tmp_path]).hardware("other")


@pytest.mark.parametrize("pattern, expected", [
    ("(SA)*3", "SASASA"), ("S*4", "SSSS"), ("(SSSSSA)*2 SS", "SSSSSASSSSSASS"), ("MEM*E", "MEM*E"),
    ("((SA)*2 M)*2", "SASAMSASAM"),
])
def test_layer_pattern_grammar(pattern, expected):
    assert expand_pattern(pattern) == expected


def test_hardware_schema_rejects_sparse_free_dtypes_missing():
    data = spark_data()
    data["peak_flops"] = {}
    with pytest.raises(Exception, match="at least one dtype"):
        HardwareCard.model_validate(data)


@pytest.mark.parametrize("text,card", [("Meta-Llama-3-8B", "llama-3.1-8b"), ("ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-7b"),
                                       ("gpt-oss:20b", "gpt-oss-20b"), ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b"),
                                       ("Qwen/Qwen3-VL-2B-Instruct", None)])
def test_free_text_stating_a_size_needs_an_alias_of_that_size(text, card):
    """'Qwen3-VL-2B' has no card: the family alias 'qwen3' (on qwen3-8b) must not claim it."""
    if card is None:
        with pytest.raises(UnknownNameError):
            CardStore().match("models", text)
    else:
        assert CardStore().match("models", text).name == card


def test_a_published_checkpoint_name_carries_its_formats(tmp_path):
    data = yaml.safe_load((bundled_dir() / "models" / "llama-3.1-8b.yaml").read_text())
    data.update(name="my-model", aliases=["acme/My-Model"],
                checkpoints={"acme/My-Model-FP8-mlp": {"weights": "ffn=fp8,default=bf16", "source": "its config.json"}})
    write_card(tmp_path, "models", data)
    st = CardStore([tmp_path])
    assert st.model_and_format("ACME/my-model-fp8-MLP") == (st.model("my-model"), "ffn=fp8,default=bf16")
    assert st.model_and_format("acme/My-Model") == (st.model("my-model"), None)
    data["checkpoints"]["acme/My-Model-FP8-mlp"]["weights"] = "mlp=fp8"
    write_card(tmp_path, "models", data)
    with pytest.raises(CardError, match="unknown component 'mlp'"):
        CardStore([tmp_path]).model("my-model")


@pytest.mark.parametrize("kind", ["hardware", "models", "runtimes"])
def test_no_two_bundled_cards_answer_to_the_same_loose_spelling(kind):
    """'Llama 3 8B' is looked up with case and punctuation ignored: if two cards had aliases spelling the same key
    ('llama3:8b' on one, 'llama-3-8b' on another) the lookup would refuse it as ambiguous."""
    owners: dict[str, set[str]] = {}
    for card in CardStore().all(kind):
        for alias in names_of(card):
            owners.setdefault(name_key(alias), set()).add(card.name)
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}


@pytest.mark.parametrize("text, card", [("Llama 3 8B", "llama-3-8b"), ("llama3:8b", "llama-3-8b"),
                                        ("Llama 3.1 8B", "llama-3.1-8b"), ("llama 3 70b", "llama-3-70b"),
                                        ("qwen2.5:32b", "qwen2.5-32b"), ("gemma2:9b", "gemma-2-9b"),
                                        ("mixtral:8x22b", "mixtral-8x22b"), ("Qwen/Qwen3-4B", "qwen3-4b")])
def test_model_names_users_type_resolve(text, card):
    assert CardStore().model(text).name == card
