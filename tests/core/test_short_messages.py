"""A library's long message is shortened for the status line without cutting a word
(core.models.files.short_message, used by the Hugging Face and timm loaders)."""

from __future__ import annotations

import json

import pytest

from inspector.core.models import files as model_files
from inspector.core.models.files import ModelLoadError

FOLDER = "/data/experiments/" + "/".join(["a-rather-long-run-name-with-many-parts"] * 6)
NO_WEIGHTS = (f"Error no file named model.safetensors, or pytorch_model.bin, found in "
              f"directory {FOLDER}/checkpoint-12000.")


def words_of(text: str) -> list[str]:
    return text.removesuffix("…").split()


def test_a_short_message_is_its_first_line_whole():
    assert model_files.short_message("\x1b[31mno such file\x1b[0m\nTraceback follows") == "no such file"
    assert model_files.short_message("") == ""


def test_a_long_first_sentence_is_cut_at_a_word_with_an_ellipsis():
    assert len(NO_WEIGHTS) > 300
    shown = model_files.short_message(NO_WEIGHTS)
    assert shown.endswith("…") and len(shown) <= 300
    assert NO_WEIGHTS.startswith(shown.removesuffix("…"))
    # Every word shown is a whole word of the message: none cut in the middle.
    assert set(words_of(shown)) <= set(NO_WEIGHTS.split())


def test_whole_sentences_are_kept_rather_than_a_cut_one():
    first = "The checkpoint you are trying to load has model type `nonsense` but Transformers " \
            "does not recognize this architecture."
    text = first + " " + "This could be because of an issue with the checkpoint, " * 8
    assert len(text) > 300
    assert model_files.short_message(text) == first


def test_a_single_word_longer_than_the_limit_is_cut_with_an_ellipsis():
    shown = model_files.short_message("x" * 500, limit=300)
    assert shown == "x" * 299 + "…"


@pytest.fixture
def hf_folder(tmp_path):
    pytest.importorskip("transformers")
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "vit"}))
    return folder


def test_the_hf_loader_does_not_cut_its_message_mid_word(hf_folder, monkeypatch):
    import transformers

    from inspector.core.models.base import ModelSpec
    from inspector.core.models.load import load_model

    def refuse(*args, **kwargs):
        raise OSError(NO_WEIGHTS + "\nYou can download the weights with ...")

    monkeypatch.setattr(transformers.AutoModelForImageClassification, "from_pretrained", refuse)
    with pytest.raises(ModelLoadError) as info:
        load_model(ModelSpec(name=f"hf:{hf_folder}", device="cpu"))
    message = str(info.value)
    prefix = "transformers could not load checkpoint as an image classifier: OSError: "
    assert message.startswith(prefix)
    shown = message.removeprefix(prefix)
    assert shown.endswith("…")
    assert set(words_of(shown)) <= set(NO_WEIGHTS.split())
    assert NO_WEIGHTS in info.value.details  # the whole text, on request
