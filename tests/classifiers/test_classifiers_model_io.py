"""inputs.preamble on real RL-Lean candidates: what each view drops, that the encoder's head then
starts nearer the theorem, and that training and a loaded run's scoring format a program the same
way."""

from __future__ import annotations

import re

import pytest

from classifiers.evaluator import ClassifierEvaluator
from classifiers.model_io import EncoderInputs, OneTokenInputs, preamble_view, strip_preamble

HEADER_LINE = re.compile(r"(import|set_option|open)\b")


def _contains(ids: list[int], part: list[int]) -> bool:
    return any(ids[i : i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def test_views_drop_the_header_then_the_docstring(real_programs):
    with_docstring = 0
    for name, program, _ in real_programs:
        header_gone = preamble_view(program, "drop_header")
        statement = preamble_view(program, "drop_header_and_docstring")
        assert preamble_view(program, "keep") == program
        assert statement.startswith(f"theorem {name}") and header_gone.endswith(statement)
        assert program.endswith(header_gone)
        # the header view drops only header lines; the rest between it and the theorem is the docstring
        dropped = program[: len(program) - len(header_gone)]
        assert all(HEADER_LINE.match(line) for line in dropped.splitlines() if line.strip())
        docstring = header_gone[: len(header_gone) - len(statement)].strip()
        with_docstring += docstring.startswith("/--") and docstring.endswith("-/")
        assert docstring == "" or (docstring.startswith("/-") and docstring.endswith("-/"))
    assert with_docstring > 300  # of the 400: the informal statement RL-Lean's prompts carry


def test_scoped_options_and_bare_headers_are_kept():
    # `set_option ... in` belongs to the declaration below it; a file of imports alone stays whole
    scoped = "import Mathlib\nset_option maxHeartbeats 400000 in\ntheorem t : True := trivial"
    assert strip_preamble(scoped, docstring=True) == scoped[len("import Mathlib\n") :]
    assert strip_preamble("import Mathlib\n") == "import Mathlib\n"
    assert strip_preamble("import Mathlib.Data.Fin\ntheorem t") == "theorem t"  # `Fin` is not `in`
    with pytest.raises(ValueError, match="inputs.preamble must be one of"):
        EncoderInputs(None, 256, preamble="strip")  # refused when the format is built


def test_encoder_view_then_starts_at_the_statement(real_programs):
    """Default 256-token view (63 head tokens): the raw header + docstring push `theorem <name>` out
    of the view of long programs; without them the view opens with it."""
    from leanloop.training.models import load_tokenizer

    tokenizer = load_tokenizer("minilm")
    raw = EncoderInputs(tokenizer, 256)
    stripped = EncoderInputs(tokenizer, 256, preamble="drop_header_and_docstring")
    lost = 0
    for name, program, _ in real_programs[:100]:
        name_ids = tokenizer(f"theorem {name}", add_special_tokens=False)["input_ids"]
        view = stripped.encode(program)
        assert view == raw.encode(strip_preamble(program, docstring=True))
        assert view[1 : 1 + len(name_ids)] == name_ids  # right after [CLS]
        lost += not _contains(raw.encode(program), name_ids)
    assert lost > 10  # the raw view of >10% of these programs has no `theorem <name>`
    # the one-token classifier takes the same option
    qwen = load_tokenizer("qwen3")
    program = real_programs[0][1]
    assert OneTokenInputs(qwen, 128, preamble="drop_header").encode(program) == OneTokenInputs(qwen, 128).encode(
        strip_preamble(program)
    )


def test_trained_format_is_the_loaded_format(real_programs, tmp_path):
    """The module records the option in classifier.json; ClassifierEvaluator.load reads it back and
    scores exactly as the module's own forward; a classifier.json from before the option loads with
    the whole program kept."""
    import json

    import torch

    from classifiers.config import InputConfig
    from classifiers.module import EncoderClassifier
    from leanloop.training.models import ModelSpec

    module = EncoderClassifier(
        ModelSpec("minilm", overrides={"num_hidden_layers": 1}),
        pooling="mean",
        inputs=InputConfig(max_length=128, preamble="drop_header_and_docstring"),
    ).eval()
    spec = module.spec()
    assert spec.preamble == "drop_header_and_docstring"
    module.model.save_pretrained(tmp_path)
    module.tokenizer.save_pretrained(tmp_path)
    spec.write(tmp_path)
    loaded = ClassifierEvaluator.load(tmp_path)
    programs = [p for _, p, _ in real_programs[:6]]
    assert [loaded.inputs.encode(p) for p in programs] == [module.encode(p) for p in programs]
    with torch.no_grad():
        batch = module.format.collate([module.encode(p) for p in programs])
        expected = module.scores(module.logits(batch)).tolist()
    assert [p.score for p in loaded.score(programs)] == pytest.approx(expected, abs=1e-5)

    old = json.loads((tmp_path / "classifier.json").read_text())
    del old["preamble"]
    (tmp_path / "classifier.json").write_text(json.dumps(old))
    assert ClassifierEvaluator.load(tmp_path).inputs.preamble == "keep"
