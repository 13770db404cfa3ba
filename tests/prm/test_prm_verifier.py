"""The step verifier: its answer format, the exact-agreement GRPO reward, and one GRPO update through
the project's TRL-parity update raising the probability of the answer that agrees with Lean."""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader

from leanloop.grpo.objective import GRPOConfig, completion_logps
from leanloop.grpo.rollout import RolloutGenerationConfig, Rollouts, completion_mask
from leanloop.training.models import ModelSpec
from leanloop.training.optim import OptimConfig
from prm.data import VerifierExample
from prm.module import PRMModule
from prm.predict import wrong_probabilities
from prm.verifier_io import END_OF_TURN, encode_proof, exact_agreement, first_error, parse_labels, render_labels


def test_answer_format_and_exact_agreement_reward():
    truth = [True, True, False, False]
    assert render_labels(truth) == " + + - -"
    assert parse_labels(" + + - -" + END_OF_TURN + " +", 4) == truth
    assert exact_agreement("+ + - -", truth) == 1.0
    assert exact_agreement("+ - - -", truth) == 0.0  # one step wrong: no reward
    assert exact_agreement("+ + -", truth) == 0.0  # a step left unlabelled
    assert exact_agreement("+ + - - +", truth) == 0.0  # one label too many
    assert exact_agreement("+ + x -", truth) == 0.0  # not a label
    assert parse_labels("all correct", 2) is None
    assert first_error(truth) == 2 and first_error([True]) is None


class _Batches(L.LightningDataModule):
    def __init__(self, example):
        super().__init__()
        self.example = example

    def train_dataloader(self):
        return DataLoader([self.example] * 4, batch_size=1, collate_fn=lambda rows: rows)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return batch


def _fit_three_updates(module, example, folder):
    trainer = L.Trainer(
        max_steps=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=folder,
    )
    trainer.fit(module, datamodule=_Batches(example))
    return trainer


def test_grpo_update_moves_towards_the_answer_that_agrees_with_lean(tmp_path):
    torch.manual_seed(0)
    module = PRMModule(
        ModelSpec(name="qwen3-tiny"),
        OptimConfig(lr=5e-3, warmup_ratio=0.0, schedule="constant"),
        mode="grpo",
        grpo=GRPOConfig(num_generations=2, loss_type="grpo", micro_batch_size=2),
        generation=RolloutGenerationConfig(max_new_tokens=12),
        threads=1,
    )
    tok = module.tokenizer
    example = VerifierExample(
        "p", "t", encode_proof("x = x", ["a", "b"], [True, False], tok, "after_proof"), [True, False], False
    )
    right, wrong = " + -" + END_OF_TURN, " + +" + END_OF_TURN

    def rollouts(
        model, prompts, g, **generate_args
    ):  # the two answers stand in for sampled ones (the reward is under test)
        prompt = torch.tensor(prompts).repeat_interleave(g, 0)
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in (right, wrong)]
        width = max(map(len, ids))
        completion = torch.tensor([i + [tok.convert_tokens_to_ids(END_OF_TURN)] * (width - len(i)) for i in ids])
        mask, truncated = completion_mask(completion, module.rollout.stop_ids)
        return Rollouts(prompt, torch.ones_like(prompt), completion, mask, [right, wrong], truncated, g)

    module.rollout.generate = rollouts
    batch = rollouts(None, [example.prompt_ids], 2)

    def logp_right():
        ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
        attention = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
        with torch.no_grad():
            logps, _ = completion_logps(
                module.model, ids, attention, batch.completion_ids.size(1), compute_entropy=False
            )
        return float((logps[0] * batch.completion_mask[0]).sum())

    before = logp_right()
    trainer = _fit_three_updates(module, example, tmp_path)
    assert trainer.callback_metrics["reward/exact"] == 0.5  # one of the two answers agrees with Lean
    assert logp_right() > before + 0.1


def test_answers_are_decoded_under_the_label_grammar():
    from leanloop.training.models import load_model, load_tokenizer
    from prm.predict import greedy_answers

    spec = ModelSpec(name="qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    model = load_model(spec, tokenizer=tokenizer)  # random weights: only the grammar makes these parse
    answers = greedy_answers(model, tokenizer, ["Proof:\n1. a\n2. b", "Proof:\n1. a\n2. b\n3. c\n4. d\n5. e"], [2, 5])
    assert [len(parse_labels(a, n)) for a, n in zip(answers, [2, 5])] == [2, 5]
    assert parse_labels(answers[0], 3) is None  # exactly as many labels as steps


def test_step_scores_are_the_grammar_decoders_probabilities():
    """P(step k wrong) from one forward pass equals 1 - prod of the model's own P(' +') at each label
    slot after correct steps, whatever the batch's padding."""
    from leanloop.training.models import load_model, load_tokenizer
    from prm.predict import wrong_probabilities
    from prm.verifier_io import LabelGrammar

    torch.manual_seed(0)
    spec = ModelSpec(name="qwen3-tiny")
    tokenizer = load_tokenizer(spec)
    model = load_model(spec, tokenizer=tokenizer).eval()
    plus, minus = LabelGrammar(tokenizer, 0, []).labels
    for layout in ("after_proof", "after_each_step"):
        proofs = [encode_proof("a = a", steps, None, tokenizer, layout) for steps in (["a", "b", "c"], ["linarith"])]
        batched = wrong_probabilities(model, tokenizer, proofs, batch_size=2)
        hazards = wrong_probabilities(model, tokenizer, proofs, batch_size=2, cumulative=False)
        for proof, scores, hazard in zip(proofs, batched, hazards):
            _check_scores(model, proof, scores, hazard, plus, minus)


def _check_scores(model, proof, scores, hazard, plus, minus):
    correct_so_far, expected, expected_hazard = 1.0, [], []
    for slot in proof.slots:
        assert proof.ids[slot] == plus  # scoring reads every step after correct steps
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([proof.ids[:slot]])).logits[0, -1, [plus, minus]]
        expected_hazard.append(float(torch.softmax(logits, -1)[1]))
        correct_so_far *= 1 - expected_hazard[-1]
        expected.append(1 - correct_so_far)
    assert scores == sorted(scores) and torch.allclose(torch.tensor(scores), torch.tensor(expected), atol=1e-5)
    # cumulative=False: each step's own P(' -') after correct steps (bench.prm_rules' hazards)
    assert torch.allclose(torch.tensor(hazard), torch.tensor(expected_hazard), atol=1e-5)


def test_after_each_step_reads_each_label_where_its_step_ends():
    """The stepwise layout: step k's label token follows step k's text, before step k + 1; the
    prompt holds the statement only; the answer's text is read, its labels and end of turn trained."""
    from leanloop.training.models import load_tokenizer
    from prm.data import PRMData

    tokenizer = load_tokenizer(ModelSpec(name="qwen3-tiny"))
    steps = ["Since n is even, write n = 2k.", "So n + n = 4k."]
    proof = encode_proof("n + n = 4k", steps, [True, False], tokenizer, "after_each_step")
    text = tokenizer.decode(proof.ids)
    assert "Since n is even" not in tokenizer.decode(proof.ids[: proof.answer_start])  # proof not in the prompt
    assert tokenizer.decode(proof.ids[proof.answer_start :]).startswith("1. Since n is even, write n = 2k. +\n2.")
    assert text.endswith("2. So n + n = 4k. -" + END_OF_TURN)
    assert [tokenizer.decode(proof.ids[s]) for s in proof.slots] == [" +", " -"]
    assert proof.relabelled(None, tokenizer).ids[proof.slots[1]] == proof.ids[proof.slots[0]]
    after_proof = encode_proof("n + n = 4k", steps, [True, False], tokenizer, "after_proof")
    assert after_proof.slots == [after_proof.answer_start, after_proof.answer_start + 1]
    data = PRMData(layout="after_each_step")
    data.tokenizer = tokenizer
    example = VerifierExample("p", "t", proof, [True, False], False)
    labels = data._tokenize(example)["labels"].tolist()
    assert [i for i, x in enumerate(labels) if x != -100] == [*proof.slots, len(proof.ids) - 1]


def test_stepwise_grpo_trains_only_the_sampled_labels_and_moves_towards_lean(tmp_path):
    """``after_each_step`` GRPO: labels are sampled where their steps end (the forced step text is not
    trained on: the loss mask covers the labels up to the first ``-``), and updates raise the
    probability of Lean's labels."""
    torch.manual_seed(0)
    module = PRMModule(
        ModelSpec(name="qwen3-tiny"),
        OptimConfig(lr=5e-3, warmup_ratio=0.0, schedule="constant"),
        mode="grpo",
        grpo=GRPOConfig(num_generations=8, loss_type="grpo", micro_batch_size=8),
        generation=RolloutGenerationConfig(max_new_tokens=4),
        threads=1,
        layout="after_each_step",
    )
    tok = module.tokenizer
    truth = [True, False, False]
    example = VerifierExample(
        "p", "t", encode_proof("x = x", ["a", "b", "c"], truth, tok, "after_each_step"), truth, False
    )
    rollouts = module.stepwise_rollouts([example])
    for row, text in enumerate(rollouts.texts):
        labels = parse_labels(text, 3)
        trained = rollouts.loss_mask[row].nonzero().flatten().tolist()
        slots = [s - example.encoded.answer_start for s in example.encoded.slots]
        first = first_error(labels)
        assert trained == slots[: 3 if first is None else first + 1]
        assert labels == [k < (3 if first is None else first) for k in range(3)]  # first-error shaped
        assert [tok.decode(rollouts.completion_ids[row, s]) for s in slots] == [" +" if x else " -" for x in labels]

    def p_truth():  # step 1 right, step 2 the first error
        h = wrong_probabilities(module.model, tok, [example.encoded.relabelled(None, tok)], cumulative=False)[0]
        return (1 - h[0]) * h[1]

    before = p_truth()
    trainer = _fit_three_updates(module, example, tmp_path)
    assert p_truth() > before


def test_wrong_weight_scales_the_loss_of_wrong_labels():
    torch.manual_seed(0)
    module = PRMModule(ModelSpec(name="qwen3-tiny"), mode="sft", threads=1)
    tok = module.tokenizer
    prompt = tok("Proof:\n1. a\n2. b", add_special_tokens=False)["input_ids"]
    answer = tok(" + -" + END_OF_TURN, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + answer])
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": torch.tensor([[-100] * len(prompt) + answer]),
    }
    with torch.no_grad():
        plain, trained = module.answer_loss(batch)
        logits = module.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        per_token = torch.nn.functional.cross_entropy(logits, torch.tensor(answer), reduction="none")
        module.wrong_weight = 3.0
        weighted, _ = module.answer_loss(batch)
    assert trained == 3 and torch.isclose(plain, per_token.mean(), atol=1e-5)
    assert torch.isclose(weighted, (per_token[0] + 3 * per_token[1] + per_token[2]) / 5, atol=1e-5)
