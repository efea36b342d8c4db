"""The command line as its docs and `--help` describe it: every subcommand is in docs/cli.md
and the README, and `train-demo --help` explains every option without loading torch."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from inspector import cli

ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> set[str]:
    (sub,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    names = set(sub.choices) | {"train-demo"}  # train-demo is dispatched before the parser
    return names - {"analyze", "visualize"}  # the American spellings are aliases


def test_every_subcommand_is_in_docs_cli_md_and_the_readme():
    docs = (ROOT / "docs" / "cli.md").read_text()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The command line", 1)[1].split("\n## ", 1)[0]
    command_list = docs.split("```", 2)[1]  # the page's first block: the commands
    for name in sorted(_subcommands()):
        said = re.compile(rf"network-inspector {re.escape(name)}(\s|$)", re.M)
        assert said.search(command_list), f"docs/cli.md's command list lacks {name}"
        assert said.search(section), f"the README's command line section lacks {name}"


def test_train_demo_help_explains_every_option_without_importing_torch():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = ("import sys; from inspector import cli\n"
            "try: cli.main(['train-demo', '--help'])\n"
            "except SystemExit: pass\n"
            "print('torch' in sys.modules, 'inspector.demo.train' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for option in ("--out", "--steps", "--seed", "--images", "--workers", "--no-progress"):
        line = re.search(rf"^\s+{option}\b.*$", proc.stdout, re.M)
        assert line and len(line.group(0).split()) > 2, option  # the option and its text
    assert proc.stderr.strip().splitlines()[-1] == "False False"
    assert not re.search(r"\|\s+torch$", proc.stderr, re.M)  # -X importtime: torch never imported


def test_the_readme_says_what_make_test_needs_and_the_clone_form_of_the_extras():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    wanted = set(re.findall(r"\b(libxcb-[\w-]+|xvfb|imagemagick|libxkbcommon-x11-0)\b", ci))
    assert wanted and all(name in readme for name in wanted), wanted - set(readme.split())
    assert "reference libraries" in readme and "7 GB" in readme
    for extra in re.findall(r"pip install 'network-inspector\[(\w+)\]'", readme)[:1]:
        assert f"pip install '.[{extra}]'" in readme


def test_every_extra_named_in_the_docs_has_its_form_from_a_clone():
    """`pip install 'network-inspector[X]'` works once the package is published; a clone
    needs `pip install '.[X]'`: wherever docs/ names an extra, both are there (the README
    says it once above its list of extras: the test above)."""
    import re

    root = Path(__file__).resolve().parents[2]
    missing = []
    for page in sorted((root / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for extra in sorted(set(re.findall(r"network-inspector\[(\w+)\]", text))):
            if f"'.[{extra}]'" not in text:
                missing.append(f"{page.name}: {extra}")
    assert missing == [], missing


def test_every_make_target_the_readme_names_is_in_the_makefile():
    readme = (ROOT / "README.md").read_text()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make ([\w-]+)`|^make ([\w-]+)", readme, re.M))
    named = {a or b for a, b in named}
    assert {"run", "test", "test-fast"} <= named
    assert named <= targets, named - targets
