"""The concepts file a folder's concept is read from (`network-inspector concepts --out DIR`):
whatever DIR/concepts.json holds, a reader's answer is the concept or one sentence naming the
file (a list, or entries without "channel", showed "Internal error: ...")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inspector.ui.featurevis.folder_concepts import FolderConceptError, read_folder_concept

GOOD = {"layer": "stage3", "k": 2, "images": 5, "concepts": [
    {"index": 1, "share": 0.25, "top_classes": [{"label": "circle", "p": 0.5}],
     "top_channels": [{"channel": 3}, {"channel": 7}]}]}


def write(folder, doc) -> None:
    np.savez(folder / "concepts.npz", vectors=np.eye(2, 4))
    (folder / "concepts.json").write_text(json.dumps(doc))


def test_a_concepts_file_as_the_command_writes_it_is_read(tmp_path):
    write(tmp_path, GOOD)
    concept = read_folder_concept(tmp_path, "stage3", 1)
    assert concept.vector == (0.0, 1.0, 0.0, 0.0)
    assert "Top channels: 3, 7." in concept.tooltip and "25.0%" in concept.caption


@pytest.mark.parametrize("doc", [
    [GOOD],  # a list where the object goes
    {**GOOD, "concepts": [{"index": 1, "top_channels": [{"unit": 3}]}]},  # no "channel"
    {**GOOD, "concepts": [{"index": 1, "top_channels": [{"channel": "²"}]}]},
    {**GOOD, "concepts": ["stage3"]},
    {**GOOD, "concepts": [{"index": 1, "top_classes": [{"label": "x"}]}]},  # no "p"
])
def test_a_crafted_concepts_file_is_one_sentence_naming_it(tmp_path, doc):
    write(tmp_path, doc)
    with pytest.raises(FolderConceptError) as caught:
        read_folder_concept(tmp_path, "stage3", 1)
    message = str(caught.value)
    assert str(tmp_path / "concepts.json") in message and "\n" not in message
